#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, only when they are missing.
set -euo pipefail
need=()
command -v espeak-ng >/dev/null 2>&1 || need+=(espeak-ng)
[ -x /usr/bin/chromium ] || need+=(chromium)  # the dashboard test drives it via Playwright
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)  # the distributed-mode tests
# real speech for the accuracy gates (tests/support/real_speech.py)
[ -f /usr/share/pocketsphinx/test/data/librivox/transcription ] || need+=(pocketsphinx-testdata)
for lang in en es fr it ru; do
  [ -f "/usr/share/doc/asterisk-core-sounds-$lang/core-sounds-$lang.txt.gz" ] || need+=("asterisk-core-sounds-$lang")
  dpkg -s "asterisk-core-sounds-$lang-wav" >/dev/null 2>&1 || need+=("asterisk-core-sounds-$lang-wav")
done
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing system packages: ${need[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
