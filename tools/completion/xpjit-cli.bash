# bash completion for xpjit-cli (make install puts it in
# PREFIX/share/bash-completion/completions/xpjit-cli).
_xpjit_cli() {
  local cur prev cmd sub
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  cmd=${COMP_WORDS[1]}
  sub=${COMP_WORDS[2]}
  local dtypes="bool i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64"
  case $prev in
  --target)
    COMPREPLY=($(compgen -W "spirv spirv:1.0 spirv:1.1 spirv:1.2 spirv:1.3 spirv:1.4 ptx:sm_70 ptx:sm_75 ptx:sm_80 ptx:sm_86 ptx:sm_89 ptx:sm_90 ptx:sm_100 ptx:sm_120 cpu cpu:x86-64 cpu:x86-64-v3" -- "$cur"))
    return ;;
  --emit)
    COMPREPLY=($(compgen -W "bin asm ll" -- "$cur")); return ;;
  --dtype)
    COMPREPLY=($(compgen -W "T=" -- "$cur")); compopt -o nospace 2>/dev/null
    case $cur in *=*) COMPREPLY=($(compgen -P "${cur%%=*}=" -W "$dtypes" -- "${cur#*=}")) ;; esac
    return ;;
  --color)
    COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return ;;
  -o|--path|--socket|--output)
    COMPREPLY=($(compgen -f -- "$cur")); return ;;
  --kernel|--ndim|--const|--timeout|--max-size|--older-than)
    return ;;
  esac
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "check ir emit devices cache bundle daemon env --help --version" -- "$cur"))
    return
  fi
  local opts=""
  case $cmd in
  check) opts="--color --help" ;;
  ir) opts="--kernel --dtype --const --ndim --hash -o --color --help" ;;
  emit) opts="--kernel --dtype --const --ndim --target --emit -o --no-isolate --timeout --check --opt --fast-math --color --help" ;;
  devices) opts="-v --json --help" ;;
  env) opts="--all --markdown --help" ;;
  cache)
    if [ "$COMP_CWORD" -eq 2 ] || [ "${sub#-}" != "$sub" ]; then
      opts="stats ls show verify prune clear export --path --json --help"
    else
      case $sub in
      stats) opts="--zero --json" ;;
      show) opts="-o --json" ;;
      verify) opts="--repair --json" ;;
      prune) opts="--max-size --older-than --json" ;;
      *) opts="--json" ;;
      esac
    fi ;;
  bundle)
    if [ "$COMP_CWORD" -eq 2 ]; then opts="build ls verify import --help"
    else opts="--dtype --const --ndim --target -o --path --json"; fi ;;
  daemon)
    if [ "$COMP_CWORD" -eq 2 ]; then opts="status stats stop --help"
    else opts="--socket --timeout --json"; fi ;;
  esac
  if [ "${cur#-}" != "$cur" ] || [ -z "$cur" ] && [ -n "$opts" ]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
  case $cmd in
  check|ir|emit|bundle) COMPREPLY+=($(compgen -f -X '!*.@(xpk|xpb)' -- "$cur") $(compgen -d -- "$cur")) ;;
  esac
}
complete -F _xpjit_cli xpjit-cli
