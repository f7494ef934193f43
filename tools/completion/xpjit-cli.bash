# bash completion for xpjit-cli (make install puts it in
# PREFIX/share/bash-completion/completions/xpjit-cli).
_xpjit_cli() {
  local cur prev cmd sub i
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  # --key=value: bash splits it at '=' (COMP_WORDBREAKS)
  if [ "$prev" = "=" ] && [ "$COMP_CWORD" -ge 2 ]; then
    prev=${COMP_WORDS[COMP_CWORD-2]}
  elif [ "$cur" = "=" ]; then
    prev=${COMP_WORDS[COMP_CWORD-1]}
    cur=""
  fi
  # the command and subcommand: the first words that are not options
  # (global options such as --color=always may come first)
  cmd=""
  sub=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
    -* | =) ;;
    *)
      case ${COMP_WORDS[i-1]} in --color | --path | --socket | =) continue ;; esac
      if [ -z "$cmd" ]; then cmd=${COMP_WORDS[i]}
      elif [ -z "$sub" ]; then sub=${COMP_WORDS[i]}; break
      fi ;;
    esac
  done
  local dtypes="bool i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64"
  case $prev in
  --target)
    COMPREPLY=($(compgen -W "spirv spirv:1.0 spirv:1.1 spirv:1.2 spirv:1.3 spirv:1.4 ptx:sm_70 ptx:sm_75 ptx:sm_80 ptx:sm_86 ptx:sm_89 ptx:sm_90 ptx:sm_100 ptx:sm_120 cpu cpu:x86-64 cpu:x86-64-v3" -- "$cur"))
    return ;;
  --emit)
    COMPREPLY=($(compgen -W "bin asm llvm" -- "$cur")); return ;;
  --check)
    COMPREPLY=($(compgen -W "bounds all none" -- "$cur")); return ;;
  --dtype)
    COMPREPLY=($(compgen -W "T= $dtypes" -- "$cur")); compopt -o nospace 2>/dev/null
    case $cur in *=*) COMPREPLY=($(compgen -P "${cur%%=*}=" -W "$dtypes" -- "${cur#*=}")) ;; esac
    return ;;
  --color)
    COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return ;;
  -O)
    COMPREPLY=($(compgen -W "0 1 2 3" -- "$cur")); return ;;
  -o|--output|--path|--socket)
    COMPREPLY=($(compgen -f -- "$cur")); return ;;
  --kernel|--ndim|--const|--timeout|--max-size|--older-than|-j|--jobs)
    return ;;
  esac
  if [ -z "$cmd" ]; then
    COMPREPLY=($(compgen -W "check ir emit devices cache bundle daemon env help --color --help --version" -- "$cur"))
    return
  fi
  local common="--color --help --version" opts=""
  case $cmd in
  check) opts="$common" ;;
  ir) opts="--kernel --dtype --const --ndim --hash -o --output $common" ;;
  emit) opts="--kernel --dtype --const --ndim --target --emit -o --output -O -g --fast-math --fp-contract --check --no-isolate --timeout $common" ;;
  devices) opts="-v --verbose --json $common" ;;
  env) opts="--all --markdown $common" ;;
  help) opts="check ir emit devices cache bundle daemon env" ;;
  cache)
    case $sub in
    "") opts="stats ls show verify prune clear export --path --json $common" ;;
    stats) opts="--zero --path --json $common" ;;
    show) opts="-o --output --path --json $common" ;;
    verify) opts="--repair --path --json $common" ;;
    prune) opts="--max-size --older-than --path --json $common" ;;
    *) opts="--path --json $common" ;;
    esac ;;
  bundle)
    case $sub in
    "") opts="build ls verify import $common" ;;
    build) opts="--dtype --const --ndim --kernel --target -o --output -O -j --jobs --fast-math --fp-contract --check --keep-going --json $common" ;;
    import) opts="--path --json $common" ;;
    *) opts="--json $common" ;;
    esac ;;
  daemon)
    if [ -z "$sub" ]; then opts="status stats stop --socket --json $common"
    else opts="--socket --timeout --json $common"; fi ;;
  esac
  if [ "${cur#-}" != "$cur" ] || [ -z "$cur" ] || [ "$cmd" = help ] ||
    { [ -z "$sub" ] && { [ "$cmd" = cache ] || [ "$cmd" = bundle ] || [ "$cmd" = daemon ]; }; }; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
  case $cmd in
  check|ir|emit) COMPREPLY+=($(compgen -f -X '!*.xpk' -- "$cur") $(compgen -d -- "$cur")) ;;
  bundle) [ -n "$sub" ] && COMPREPLY+=($(compgen -f -X '!*.@(xpk|xpb)' -- "$cur") $(compgen -d -- "$cur")) ;;
  esac
}
complete -F _xpjit_cli xpjit-cli
