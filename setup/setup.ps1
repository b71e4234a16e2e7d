<#
.SYNOPSIS
  Tollgate setup script (Windows PowerShell 5.1 and PowerShell 7+).

.DESCRIPTION
  Writes environment files for a coding tool into ~/.tollgate/ and nothing
  else: it installs no CLI and edits no PowerShell profile. Load the generated
  file in the session where you run the tool, e.g.  . ~/.tollgate/claude.ps1

  Files written (on Linux/macOS: directory mode 0700, files mode 0600; on
  Windows they inherit the ACL of your user profile, which only you can read):
    claude  ~/.tollgate/claude.ps1         Claude Code (Anthropic Messages API)
    codex   ~/.tollgate/codex.ps1          Codex CLI (OpenAI Responses API)
            ~/.tollgate/codex/config.toml  Codex config used via CODEX_HOME
    openai  ~/.tollgate/openai.ps1         generic OpenAI chat-completions tools
    all     all of the above

.PARAMETER Target
  claude, codex, openai or all. Asked for when missing.

.PARAMETER Key
  Your Tollgate API key (starts with sk_svc_). Asked for, hidden, when missing.
  Passing it on the command line leaves it in your history.

.PARAMETER BaseUrl
  Gateway base URL, e.g. https://gateway.example.com/v1 (http or https; /v1 is
  appended when missing). Asked for when missing.

.EXAMPLE
  powershell -ExecutionPolicy Bypass -File .\setup.ps1 -Target claude -BaseUrl https://gateway.example.com/v1

.EXAMPLE
  & ([scriptblock]::Create((irm https://gateway.example.com/setup/setup.ps1))) -Target codex -BaseUrl https://gateway.example.com/v1
#>
[CmdletBinding()]
param(
  [string]$Target,
  [string]$Key,
  [string]$BaseUrl
)

$ErrorActionPreference = 'Stop'

# Model ids the generated files point at. GET <base>/models is authoritative;
# edit the generated file if your plan enables other ids.
$ClaudeMainModel   = 'alpha-sonnet-5'
$ClaudeOpusModel   = 'alpha-opus-5'
$ClaudeSonnetModel = 'alpha-sonnet-5'
$ClaudeHaikuModel  = 'alpha-haiku-4.5'
$ClaudeFableModel  = 'alpha-fable-5.1'
$CodexModel        = 'cx/gen-6-sol'
$CodexProvider     = 'tollgate'
$CodexKeyVar       = 'TOLLGATE_API_KEY'

# Errors are thrown, not exit-ed: when run as a script block the caller's
# session must survive; with -File an uncaught error gives exit code 1.
function Stop-Setup([string]$Message) {
  throw "setup.ps1: error: $Message"
}

# ---------------------------------------------------------------- prompting

function Read-Answer([string]$Prompt) {
  $answer = Read-Host -Prompt $Prompt
  if ($null -eq $answer) { return '' }
  return $answer.Trim()
}

function Read-Secret([string]$Prompt) {
  $secure = Read-Host -Prompt $Prompt -AsSecureString
  if ($null -eq $secure) { return '' }
  $bstr = [Runtime.InteropServices.Marshal]::SecureStringToBSTR($secure)
  try {
    $plain = [Runtime.InteropServices.Marshal]::PtrToStringBSTR($bstr)
  } finally {
    [Runtime.InteropServices.Marshal]::ZeroFreeBSTR($bstr)
  }
  if ($null -eq $plain) { return '' }
  return $plain.Trim()
}

if (-not $PSBoundParameters.ContainsKey('Target')) {
  $Target = Read-Answer 'Target (claude, codex, openai, all)'
}
$Target = "$Target".ToLowerInvariant()
if (@('claude', 'codex', 'openai', 'all') -notcontains $Target) {
  Stop-Setup "target must be one of: claude, codex, openai, all (got '$Target')"
}

if (-not $PSBoundParameters.ContainsKey('Key')) {
  $Key = Read-Secret 'Tollgate API key (sk_svc_..., input hidden)'
}
if (-not $PSBoundParameters.ContainsKey('BaseUrl')) {
  $BaseUrl = Read-Answer 'Gateway base URL (e.g. https://gateway.example.com/v1)'
}

# ---------------------------------------------------------------- validation

# The same rules as setup.sh; -cmatch/-cnotmatch are case-sensitive and \A...\z
# anchor the whole string (a trailing newline does not slip through).
if ([string]::IsNullOrEmpty($Key)) {
  Stop-Setup 'the API key is empty; it must start with sk_svc_'
}
if (-not $Key.StartsWith('sk_svc_', [StringComparison]::Ordinal) -or $Key.Length -le 7) {
  Stop-Setup 'the API key must start with sk_svc_ (check that you copied the whole key)'
}
# Printable ASCII only, no blanks.
if ($Key -cnotmatch '\A[\x21-\x7E]+\z') {
  Stop-Setup 'the API key contains spaces, control or non-ASCII characters; copy it again'
}

if ($BaseUrl -cnotmatch '^https?://.') {
  Stop-Setup "the base URL must start with http:// or https:// (got '$BaseUrl')"
}
# Characters allowed in a URL (RFC 3986).
if ($BaseUrl -cnotmatch '\A[A-Za-z0-9._~:/@!$&''()*+,;=%\[\]-]+\z') {
  Stop-Setup 'the base URL contains characters not allowed in a URL (spaces, quotes, ...)'
}
if ($BaseUrl.Contains('?') -or $BaseUrl.Contains('#')) {
  Stop-Setup 'the base URL must not have a query (?) or fragment (#)'
}
$urlRest = $BaseUrl.Substring($BaseUrl.IndexOf('://') + 3)
$urlHost = $urlRest.Split('/')[0]
$urlHost = $urlHost.Substring($urlHost.LastIndexOf('@') + 1)
if ($urlHost -eq '' -or $urlHost.StartsWith(':')) {
  Stop-Setup "the base URL has no host name (got '$BaseUrl')"
}

# Normalise: no trailing slash, ends in /v1.
$BaseUrl = $BaseUrl.TrimEnd('/')
if (-not $BaseUrl.EndsWith('/v1', [StringComparison]::Ordinal)) {
  $BaseUrl = "$BaseUrl/v1"
}
# Claude Code appends /v1/messages itself, so it gets the URL without /v1.
$AnthropicBaseUrl = $BaseUrl.Substring(0, $BaseUrl.Length - 3)

$homeDir = $HOME
if ([string]::IsNullOrEmpty($homeDir)) { $homeDir = $env:USERPROFILE }
if ([string]::IsNullOrEmpty($homeDir) -or -not (Test-Path -LiteralPath $homeDir -PathType Container)) {
  Stop-Setup 'cannot find your home directory'
}
$dir = Join-Path $homeDir '.tollgate'
$codexDir = Join-Path $dir 'codex'

# PowerShell 7 on Linux/macOS sets $IsWindows; Windows PowerShell 5.1 does not.
$onUnix = $false
$isWinVar = Get-Variable -Name IsWindows -ErrorAction SilentlyContinue
if ($null -ne $isWinVar -and -not $isWinVar.Value) { $onUnix = $true }

# ---------------------------------------------------------------- writing

# A PowerShell single-quoted string literal: only ' needs escaping (doubled).
function ConvertTo-PsLiteral([string]$Value) {
  return "'" + $Value.Replace("'", "''") + "'"
}

# A TOML basic string.
function ConvertTo-TomlString([string]$Value) {
  return '"' + $Value.Replace('\', '\\').Replace('"', '\"') + '"'
}

function Format-EnvLine([string]$Name, [string]$Value) {
  return '$env:' + $Name + ' = ' + (ConvertTo-PsLiteral $Value)
}

function Assert-NotLink([string]$Path) {
  if (Test-Path -LiteralPath $Path) {
    $item = Get-Item -LiteralPath $Path -Force
    if ($item.Attributes -band [IO.FileAttributes]::ReparsePoint) {
      Stop-Setup "$Path is a link; remove it first"
    }
  }
}

function Set-UnixMode([string]$Path, [string]$Mode) {
  if ($onUnix) {
    & chmod $Mode $Path
    if ($LASTEXITCODE -ne 0) { Stop-Setup "cannot set mode $Mode on $Path" }
  }
}

function New-PrivateDirectory([string]$Path) {
  Assert-NotLink $Path
  if (Test-Path -LiteralPath $Path -PathType Leaf) {
    Stop-Setup "$Path exists and is not a directory"
  }
  if (-not (Test-Path -LiteralPath $Path -PathType Container)) {
    New-Item -ItemType Directory -Path $Path | Out-Null
  }
  Set-UnixMode $Path '700'
}

# Writes UTF-8 without BOM (Windows PowerShell's -Encoding UTF8 adds one) to a
# temporary file that is made private before the content goes in, then moves
# it over the target.
function Write-PrivateFile([string]$Path, [string[]]$Lines) {
  Assert-NotLink $Path
  if (Test-Path -LiteralPath $Path -PathType Container) {
    Stop-Setup "$Path exists and is not a regular file"
  }
  $tmp = "$Path.tmp.$PID"
  $text = ($Lines -join "`n") + "`n"
  try {
    [IO.File]::WriteAllText($tmp, '')
    Set-UnixMode $tmp '600'
    [IO.File]::WriteAllText($tmp, $text, (New-Object Text.UTF8Encoding($false)))
    if (Test-Path -LiteralPath $Path) { Remove-Item -LiteralPath $Path -Force }
    [IO.File]::Move($tmp, $Path)
  } finally {
    if (Test-Path -LiteralPath $tmp) { Remove-Item -LiteralPath $tmp -Force }
  }
  Set-UnixMode $Path '600'
  Write-Host "Wrote $Path"
}

function Get-Header([string]$Tool, [string]$File) {
  return @(
    "# Tollgate settings for $Tool, written by setup.ps1.",
    "# Load in the session where you run the tool:  . ~/.tollgate/$File",
    '# Contains your API key: keep this file private, never commit it.'
  )
}

function Write-Claude {
  $lines = (Get-Header 'Claude Code' 'claude.ps1') + @(
    (Format-EnvLine 'ANTHROPIC_BASE_URL' $AnthropicBaseUrl),
    (Format-EnvLine 'ANTHROPIC_AUTH_TOKEN' $Key),
    '# Empty (PowerShell removes the variable) so that an Anthropic key from elsewhere does not take precedence.',
    (Format-EnvLine 'ANTHROPIC_API_KEY' ''),
    (Format-EnvLine 'ANTHROPIC_MODEL' $ClaudeMainModel),
    (Format-EnvLine 'ANTHROPIC_DEFAULT_OPUS_MODEL' $ClaudeOpusModel),
    (Format-EnvLine 'ANTHROPIC_DEFAULT_SONNET_MODEL' $ClaudeSonnetModel),
    (Format-EnvLine 'ANTHROPIC_DEFAULT_HAIKU_MODEL' $ClaudeHaikuModel),
    (Format-EnvLine 'ANTHROPIC_DEFAULT_FABLE_MODEL' $ClaudeFableModel),
    '# Older Claude Code releases read this instead of ANTHROPIC_DEFAULT_HAIKU_MODEL.',
    (Format-EnvLine 'ANTHROPIC_SMALL_FAST_MODEL' $ClaudeHaikuModel),
    (Format-EnvLine 'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC' '1')
  )
  Write-PrivateFile (Join-Path $dir 'claude.ps1') $lines
}

function Write-Codex {
  New-PrivateDirectory $codexDir
  $toml = @(
    '# Tollgate provider for Codex CLI, written by setup.ps1.',
    '# Used when CODEX_HOME points at this directory (load ~/.tollgate/codex.ps1).',
    "# The key is not stored here: Codex reads it from the $CodexKeyVar environment variable.",
    ('model = ' + (ConvertTo-TomlString $CodexModel)),
    ('model_provider = ' + (ConvertTo-TomlString $CodexProvider)),
    '',
    "[model_providers.$CodexProvider]",
    'name = "Tollgate"',
    ('base_url = ' + (ConvertTo-TomlString $BaseUrl)),
    ('env_key = ' + (ConvertTo-TomlString $CodexKeyVar)),
    'wire_api = "responses"'
  )
  Write-PrivateFile (Join-Path $codexDir 'config.toml') $toml
  $lines = (Get-Header 'Codex CLI' 'codex.ps1') + @(
    (Format-EnvLine 'CODEX_HOME' $codexDir),
    (Format-EnvLine $CodexKeyVar $Key)
  )
  Write-PrivateFile (Join-Path $dir 'codex.ps1') $lines
}

function Write-OpenAI {
  $lines = (Get-Header 'OpenAI-compatible tools' 'openai.ps1') + @(
    (Format-EnvLine 'OPENAI_BASE_URL' $BaseUrl),
    (Format-EnvLine 'OPENAI_API_BASE' $BaseUrl),
    (Format-EnvLine 'OPENAI_API_KEY' $Key)
  )
  Write-PrivateFile (Join-Path $dir 'openai.ps1') $lines
}

New-PrivateDirectory $dir
switch ($Target) {
  'claude' { Write-Claude }
  'codex'  { Write-Codex }
  'openai' { Write-OpenAI }
  'all'    { Write-Claude; Write-Codex; Write-OpenAI }
}

$checks = @{
  'claude' = @(
    '  . ~/.tollgate/claude.ps1',
    '  irm "$env:ANTHROPIC_BASE_URL/v1/models" -Headers @{ Authorization = "Bearer $env:ANTHROPIC_AUTH_TOKEN" }',
    '  claude'
  )
  'codex'  = @(
    '  . ~/.tollgate/codex.ps1',
    ('  irm ' + (ConvertTo-PsLiteral "$BaseUrl/models") + ' -Headers @{ Authorization = "Bearer $env:TOLLGATE_API_KEY" }'),
    '  codex'
  )
  'openai' = @(
    '  . ~/.tollgate/openai.ps1',
    '  irm "$env:OPENAI_BASE_URL/models" -Headers @{ Authorization = "Bearer $env:OPENAI_API_KEY" }'
  )
}
Write-Host ''
Write-Host 'Nothing else was changed: no CLI installed, no profile edited.'
Write-Host 'Load the settings in the session where you run the tool, then check the connection:'
$shown = if ($Target -eq 'all') { @('claude', 'codex', 'openai') } else { @($Target) }
foreach ($t in $shown) {
  foreach ($line in $checks[$t]) { Write-Host $line }
  Write-Host ''
}
Write-Host 'If the execution policy blocks loading the file, run once:'
Write-Host '  Set-ExecutionPolicy -Scope CurrentUser RemoteSigned'
