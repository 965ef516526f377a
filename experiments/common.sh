# Shared by the experiment scripts: the sfclab binary, and QUICK=1 for a short smoke run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SFCLAB="${SFCLAB:-$here/../target/release/sfclab}"
if [ ! -x "$SFCLAB" ]; then
  (cd "$here/.." && cargo build --release -q -p sfclab)
fi
OUT="${OUT:-$here/../results}"
if [ "${QUICK:-0}" = 1 ]; then
  TRIAL=(--duration 100ms --warmup 20ms)
  REPEAT=1
else
  TRIAL=(--duration 1s --warmup 300ms)
  REPEAT=3
fi
