#!/bin/sh
# Tollgate setup script (POSIX sh).
#
# Writes environment files for a coding tool into ~/.tollgate/ and nothing
# else: it installs no CLI and edits no shell profile. Load the generated file
# in the shell where you run the tool, e.g.  . ~/.tollgate/claude.env
#
# Usage:
#   sh setup.sh --target claude|codex|openai|all --key sk_svc_... --base-url https://host/v1
#   sh setup.sh                        # asks for the missing values
#   curl -fsSL https://host/setup/setup.sh | sh -s -- --target claude --key sk_svc_... --base-url https://host/v1
#
# Files written (directory mode 0700, files mode 0600):
#   claude  ~/.tollgate/claude.env         Claude Code (Anthropic Messages API)
#   codex   ~/.tollgate/codex.env          Codex CLI (OpenAI Responses API)
#           ~/.tollgate/codex/config.toml  Codex config used via CODEX_HOME
#   openai  ~/.tollgate/openai.env         generic OpenAI chat-completions tools
#   all     all of the above

set -eu
umask 077
# Byte-wise, locale-independent character classes in the validation below.
LC_ALL=C
export LC_ALL

PROG=setup.sh

# Model ids the generated files point at. GET <base>/models is authoritative;
# edit the generated file if your plan enables other ids.
CLAUDE_MAIN_MODEL=alpha-sonnet-5
CLAUDE_OPUS_MODEL=alpha-opus-5
CLAUDE_SONNET_MODEL=alpha-sonnet-5
CLAUDE_HAIKU_MODEL=alpha-haiku-4.5
CLAUDE_FABLE_MODEL=alpha-fable-5.1
CODEX_MODEL=cx/gen-6-sol
CODEX_PROVIDER=tollgate
CODEX_KEY_VAR=TOLLGATE_API_KEY

# Terminal whose echo was turned off for the key prompt ('' when none).
echo_off_on=''
restore_echo() {
  if [ -n "$echo_off_on" ]; then
    stty echo <"$echo_off_on" 2>/dev/null || :
    echo_off_on=''
  fi
}

die() {
  restore_echo
  printf '%s: error: %s\n' "$PROG" "$*" >&2
  exit 1
}

usage() {
  cat <<'EOF'
Tollgate setup: writes environment files into ~/.tollgate/ (nothing else).

Usage:
  sh setup.sh [--target TARGET] [--key KEY] [--base-url URL]

Options:
  -t, --target TARGET   claude (Claude Code), codex (Codex CLI),
                        openai (generic OpenAI-compatible tool) or all
  -k, --key KEY         your Tollgate API key (starts with sk_svc_)
  -u, --base-url URL    gateway base URL, e.g. https://gateway.example.com/v1
                        (http or https; /v1 is appended when missing)
  -h, --help            show this help

Values not given as options are asked for; the key is read without echo.
Passing --key on the command line leaves the key in your shell history; leave
it out to be asked for it instead.
EOF
}

# ---------------------------------------------------------------- arguments

target=''
key=''
base_url=''
have_target=0
have_key=0
have_url=0

need_value() {
  # $1 option name, $2 number of remaining arguments
  [ "$2" -ge 2 ] || die "option $1 needs a value (see --help)"
}

while [ $# -gt 0 ]; do
  case $1 in
    -t|--target)   need_value "$1" $#; target=$2;   have_target=1; shift 2 ;;
    --target=*)    target=${1#*=};   have_target=1; shift ;;
    -k|--key)      need_value "$1" $#; key=$2;      have_key=1;    shift 2 ;;
    --key=*)       key=${1#*=};      have_key=1;    shift ;;
    -u|--base-url) need_value "$1" $#; base_url=$2; have_url=1;    shift 2 ;;
    --base-url=*)  base_url=${1#*=}; have_url=1;    shift ;;
    -h|--help)     usage; exit 0 ;;
    --)            shift; break ;;
    *)             die "unknown argument: $1 (see --help)" ;;
  esac
done
[ $# -eq 0 ] || die "unexpected argument: $1 (see --help)"

# ---------------------------------------------------------------- prompting

# Where answers are read from. When the script runs from a file, standard input
# is free and answers may be typed or piped. When the script itself arrives on
# standard input (curl ... | sh), the terminal is used instead.
input=''
choose_input() {
  [ -z "$input" ] || return 0
  script_on_stdin=1
  if [ -f "$0" ]; then
    case ${0##*/} in
      sh|-sh|dash|-dash|bash|-bash|ash|-ash|ksh|-ksh|mksh|zsh|-zsh|busybox) ;;
      *) script_on_stdin=0 ;;
    esac
  fi
  if [ "$script_on_stdin" -eq 0 ]; then
    input=/dev/stdin
  elif (: </dev/tty) 2>/dev/null; then
    input=/dev/tty
  else
    die "no terminal to ask on; pass --target, --key and --base-url"
  fi
}

no_answer() {
  printf '\n' >&2
  die "input ended before an answer was given; pass --target, --key and --base-url instead"
}

# read_answer VAR PROMPT: one line from the input, surrounding blanks and a
# trailing carriage return removed.
read_answer() {
  choose_input
  printf '%s' "$2" >&2
  answer=''
  if [ "$input" = /dev/tty ]; then
    IFS= read -r answer </dev/tty || [ -n "$answer" ] || no_answer
  else
    IFS= read -r answer || [ -n "$answer" ] || no_answer
  fi
  answer=$(printf '%s' "$answer" | tr -d '\r' | sed 's/^[[:blank:]]*//; s/[[:blank:]]*$//')
  eval "$1=\$answer"
}

read_secret() {
  choose_input
  echo_off_on=''
  if [ "$input" = /dev/tty ]; then
    stty -echo </dev/tty 2>/dev/null && echo_off_on=/dev/tty
  elif [ -t 0 ]; then
    stty -echo 2>/dev/null && echo_off_on=/dev/stdin
  fi
  trap 'restore_echo; exit 130' INT TERM HUP
  read_answer "$1" "$2"
  restore_echo
  trap - INT TERM HUP
  # The newline typed by the user was not echoed.
  printf '\n' >&2
}

if [ "$have_target" -eq 0 ]; then
  read_answer target 'Target (claude, codex, openai, all): '
fi
case $target in
  claude|codex|openai|all) ;;
  *) die "target must be one of: claude, codex, openai, all (got '$target')" ;;
esac

if [ "$have_key" -eq 0 ]; then
  read_secret key 'Tollgate API key (sk_svc_..., input hidden): '
fi
if [ "$have_url" -eq 0 ]; then
  read_answer base_url 'Gateway base URL (e.g. https://gateway.example.com/v1): '
fi

# ---------------------------------------------------------------- validation

case $key in
  sk_svc_?*) ;;
  '') die "the API key is empty; it must start with sk_svc_" ;;
  *) die "the API key must start with sk_svc_ (check that you copied the whole key)" ;;
esac
# Printable ASCII only, no blanks: a real key never has them, and they usually
# mean a paste went wrong.
case $key in
  *[!!-~]*) die "the API key contains spaces, control or non-ASCII characters; copy it again" ;;
esac

case $base_url in
  http://?*|https://?*) ;;
  *) die "the base URL must start with http:// or https:// (got '$base_url')" ;;
esac
# Characters allowed in a URL (RFC 3986); anything else is a typo or a paste error.
case $base_url in
  *[!A-Za-z0-9._~:/@!\$\&\'\(\)*+,\;=%[\]-]*)
    die "the base URL contains characters not allowed in a URL (spaces, quotes, ...)" ;;
esac
case $base_url in
  *\?*|*\#*) die "the base URL must not have a query (?) or fragment (#)" ;;
esac
url_rest=${base_url#*://}
url_host=${url_rest%%/*}
url_host=${url_host##*@}
case $url_host in
  ''|:*) die "the base URL has no host name (got '$base_url')" ;;
esac

# Normalise: no trailing slash, ends in /v1.
while :; do
  case $base_url in
    */) base_url=${base_url%/} ;;
    *) break ;;
  esac
done
case $base_url in
  */v1) ;;
  *) base_url=$base_url/v1 ;;
esac
# Claude Code appends /v1/messages itself, so it gets the URL without /v1.
anthropic_base_url=${base_url%/v1}

[ -n "${HOME:-}" ] || die "HOME is not set"
case $HOME in
  /*) ;;
  *) die "HOME must be an absolute path (got '$HOME')" ;;
esac
[ -d "$HOME" ] || die "home directory $HOME does not exist"

dir=$HOME/.tollgate
if [ -L "$dir" ]; then
  die "$dir is a symbolic link; remove it or point HOME elsewhere"
fi
if [ -e "$dir" ] && [ ! -d "$dir" ]; then
  die "$dir exists and is not a directory"
fi

# ---------------------------------------------------------------- writing

# sh_quote VALUE: VALUE as a single-quoted shell word.
sh_quote() {
  printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# toml_quote VALUE: VALUE as a TOML basic string.
toml_quote() {
  printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

env_line() {
  printf 'export %s=%s\n' "$1" "$(sh_quote "$2")"
}

tmp_file=''
cleanup() {
  if [ -n "$tmp_file" ]; then
    rm -f "$tmp_file"
  fi
}
trap cleanup EXIT

make_dir() {
  if [ -L "$1" ]; then
    die "$1 is a symbolic link; remove it first"
  fi
  if [ ! -d "$1" ]; then
    mkdir "$1" || die "cannot create $1"
  fi
  chmod 700 "$1" || die "cannot set mode 0700 on $1"
}

# install_file PATH: content from standard input, written to a temporary file
# in the same directory (mode 0600) and renamed over PATH.
install_file() {
  if [ -L "$1" ] || { [ -e "$1" ] && [ ! -f "$1" ]; }; then
    die "$1 exists and is not a regular file; remove it first"
  fi
  tmp_file=$1.tmp.$$
  rm -f "$tmp_file"
  cat >"$tmp_file" || die "cannot write $tmp_file"
  chmod 600 "$tmp_file" || die "cannot set mode 0600 on $tmp_file"
  mv -f "$tmp_file" "$1" || die "cannot write $1"
  tmp_file=''
}

header() {
  printf '# Tollgate settings for %s, written by setup.sh.\n' "$1"
  printf '# Load in the shell where you run the tool:  . ~/.tollgate/%s\n' "$2"
  printf '# Contains your API key: keep this file private (mode 0600), never commit it.\n'
}

write_claude() {
  {
    header 'Claude Code' claude.env
    env_line ANTHROPIC_BASE_URL "$anthropic_base_url"
    env_line ANTHROPIC_AUTH_TOKEN "$key"
    printf '# Empty so that an Anthropic key from elsewhere does not take precedence.\n'
    env_line ANTHROPIC_API_KEY ''
    env_line ANTHROPIC_MODEL "$CLAUDE_MAIN_MODEL"
    env_line ANTHROPIC_DEFAULT_OPUS_MODEL "$CLAUDE_OPUS_MODEL"
    env_line ANTHROPIC_DEFAULT_SONNET_MODEL "$CLAUDE_SONNET_MODEL"
    env_line ANTHROPIC_DEFAULT_HAIKU_MODEL "$CLAUDE_HAIKU_MODEL"
    env_line ANTHROPIC_DEFAULT_FABLE_MODEL "$CLAUDE_FABLE_MODEL"
    printf '# Older Claude Code releases read this instead of ANTHROPIC_DEFAULT_HAIKU_MODEL.\n'
    env_line ANTHROPIC_SMALL_FAST_MODEL "$CLAUDE_HAIKU_MODEL"
    env_line CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC 1
  } | install_file "$dir/claude.env"
  printf 'Wrote %s\n' "$dir/claude.env"
}

write_codex() {
  make_dir "$dir/codex"
  {
    printf '# Tollgate provider for Codex CLI, written by setup.sh.\n'
    printf '# Used when CODEX_HOME points at this directory (load ~/.tollgate/codex.env).\n'
    printf '# The key is not stored here: Codex reads it from $%s.\n' "$CODEX_KEY_VAR"
    printf 'model = %s\n' "$(toml_quote "$CODEX_MODEL")"
    printf 'model_provider = %s\n' "$(toml_quote "$CODEX_PROVIDER")"
    printf '\n[model_providers.%s]\n' "$CODEX_PROVIDER"
    printf 'name = "Tollgate"\n'
    printf 'base_url = %s\n' "$(toml_quote "$base_url")"
    printf 'env_key = %s\n' "$(toml_quote "$CODEX_KEY_VAR")"
    printf 'wire_api = "responses"\n'
  } | install_file "$dir/codex/config.toml"
  printf 'Wrote %s\n' "$dir/codex/config.toml"
  {
    header 'Codex CLI' codex.env
    env_line CODEX_HOME "$dir/codex"
    env_line "$CODEX_KEY_VAR" "$key"
  } | install_file "$dir/codex.env"
  printf 'Wrote %s\n' "$dir/codex.env"
}

write_openai() {
  {
    header 'OpenAI-compatible tools' openai.env
    env_line OPENAI_BASE_URL "$base_url"
    env_line OPENAI_API_BASE "$base_url"
    env_line OPENAI_API_KEY "$key"
  } | install_file "$dir/openai.env"
  printf 'Wrote %s\n' "$dir/openai.env"
}

make_dir "$dir"
case $target in
  claude) write_claude ;;
  codex)  write_codex ;;
  openai) write_openai ;;
  all)    write_claude; write_codex; write_openai ;;
esac

printf '\nNothing else was changed: no CLI installed, no shell profile edited.\n'
printf 'Load the settings in the shell where you run the tool, then check the connection:\n'
# The check commands are printed literally, for the user's shell to expand.
# shellcheck disable=SC2016
show_claude() {
  printf '%s\n' '  . ~/.tollgate/claude.env' \
    '  curl -s "$ANTHROPIC_BASE_URL/v1/models" -H "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN"' \
    '  claude'
}
# shellcheck disable=SC2016
show_codex() {
  printf '%s\n' '  . ~/.tollgate/codex.env' \
    "  curl -s $(sh_quote "$base_url/models")"' -H "Authorization: Bearer $TOLLGATE_API_KEY"' \
    '  codex'
}
# shellcheck disable=SC2016
show_openai() {
  printf '%s\n' '  . ~/.tollgate/openai.env' \
    '  curl -s "$OPENAI_BASE_URL/models" -H "Authorization: Bearer $OPENAI_API_KEY"'
}
case $target in
  claude) show_claude ;;
  codex)  show_codex ;;
  openai) show_openai ;;
  all)    show_claude; printf '\n'; show_codex; printf '\n'; show_openai ;;
esac
