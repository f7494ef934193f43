#!/bin/sh
# The docs stay true to the tree: every relative link of README.md and
# docs/*.md (and the man page sources) names a file in this repository
# (not outside it: a reader of a clone has nothing there), with its
# #anchor when it names a heading of a Markdown page; and every "abi=N"
# the docs and headers quote is the code's XPJ_ABI_VERSION.
set -u
fail=0
root=$(pwd)
bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
abi=$(sed -n 's/^#define XPJ_ABI_VERSION \([0-9]*\)$/\1/p' compiler/compile.c)
[ -n "$abi" ] || { echo "docs_check: no XPJ_ABI_VERSION in compiler/compile.c"; exit 1; }

# anchors of a Markdown file, as GitHub makes them from its headings
anchors() {
  grep '^#' "$1" | sed 's/^#* *//' | tr 'A-Z' 'a-z' |
    sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

for f in README.md docs/*.md docs/man/*.scd*; do
  [ -f "$f" ] || continue
  dir=$(dirname "$f")
  # [text](target) links, one per line, code spans left out
  sed 's/`[^`]*`//g' "$f" | grep -o '\](\([^)]*\))' | sed 's/^](\(.*\))$/\1/' |
    while read -r target; do
      case $target in
      http://* | https://* | mailto:* | man:*) continue ;;
      '#'*) path=$f anchor=${target#\#} ;;
      *'#'*) path=$dir/${target%%#*} anchor=${target#*#} ;;
      *) path=$dir/$target anchor= ;;
      esac
      real=$(realpath -m "$path")
      case $real in
      "$root"/*) ;;
      *) echo "docs_check: $f links outside the repository: $target"; echo x >> "$bad"; continue ;;
      esac
      if [ ! -e "$real" ]; then
        echo "docs_check: $f links to a missing file: $target"
        echo x >> "$bad"
        continue
      fi
      if [ -n "$anchor" ] && [ "${real%.md}" != "$real" ] &&
        ! anchors "$real" | grep -qx -- "$anchor"; then
        echo "docs_check: $f links to a missing heading: $target"
        echo x >> "$bad"
      fi
    done
  # abi=N as the versions string quotes it
  for v in $(grep -o 'abi=[0-9][0-9]*' "$f" | sed 's/abi=//' | sort -u); do
    [ "$v" = "$abi" ] || { echo "docs_check: $f says abi=$v; the code's is $abi"; echo x >> "$bad"; }
  done
done
for f in include/*.h; do
  for v in $(grep -o 'abi=[0-9][0-9]*' "$f" | sed 's/abi=//' | sort -u); do
    [ "$v" = "$abi" ] || { echo "docs_check: $f says abi=$v; the code's is $abi"; fail=1; }
  done
done
# "xpj_abi_version() is N" in docs/abi.md
grep -q "\`xpj_abi_version()\` is $abi" docs/abi.md ||
  { echo "docs_check: docs/abi.md does not say xpj_abi_version() is $abi"; fail=1; }
if [ -s "$bad" ]; then
  :
  fail=1
fi
[ $fail -eq 0 ] && echo "docs_check: links and abi= values agree with the tree (abi=$abi)"
exit $fail
