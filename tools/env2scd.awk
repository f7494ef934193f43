# The table of `xpjit-cli env --markdown --all` as scdoc (xpjit(7)'s
# ENVIRONMENT section): one entry per variable.
function esc(s) { gsub(/\\/, "\\\\", s); gsub(/[*_]/, "\\\\&", s); return s }
function trim(s) { sub(/^ +/, "", s); sub(/ +$/, "", s); return s }
/^\| `XPJIT_/ {
  n = split($0, f, "|")
  name = trim(f[2]); gsub(/`/, "", name)
  printf "*%s*\n\t%s. Values: %s. Default: %s.", esc(name), esc(trim(f[5])),
         esc(trim(f[4])), esc(trim(f[3]))
  r = trim(f[6])
  if (r != "library") printf " Read by: %s.", esc(r)
  printf "\n\n"
}
