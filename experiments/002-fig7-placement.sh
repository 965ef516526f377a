#!/usr/bin/env bash
# Seed 002, Fig. 7 and Eq. 3: maximum throughput against chain length with every NF on
# one core (s_core), Block-Interleaving over two cores (bi:2) and Pipeline-by-Pipeline
# over two cores (pbp:2); the break-even chain length n0 from which two cores beat one.
# The paper: BI breaks even early, PbP later, crossing sockets later still (n0 = 26).
source "$(dirname "$0")/common.sh"
if [ "${QUICK:-0}" = 1 ]; then LENGTHS=4,16; else LENGTHS=4,8,16,24,32,48; fi
mkdir -p "$OUT"
"$SFCLAB" bench placement --lengths "${LENGTHS}" --repeat "$REPEAT" "${TRIAL[@]}" --json > "$OUT/002-fig7.json"
"$SFCLAB" bench placement --lengths "${LENGTHS}" --repeat "$REPEAT" "${TRIAL[@]}" --nf 'synthetic(cycles=100)' --json > "$OUT/002-fig7-synthetic.json"
echo "wrote $OUT/002-fig7.json and $OUT/002-fig7-synthetic.json"
