#!/usr/bin/env bash
# Seed 002, Section IV: chains of n > 1 NFs sharing a core lose throughput when
# overloaded, because packets dropped inside the chain waste the cycles already spent
# on them; drops at the NIC do not. sfclab: drop links against backpressure links
# (only the rx-queue, the NIC, drops), n = 1, 3, 5.
source "$(dirname "$0")/common.sh"
mkdir -p "$OUT"
if [ "${QUICK:-0}" = 1 ]; then H=1,3; L=0.5,2; else H=1,3,5; L=0.5,0.8,1.0,1.2,1.5,2.0,3.0; fi
"$SFCLAB" bench overload --hops "$H" --loads "$L" --repeat "$REPEAT" "${TRIAL[@]}" --csv > "$OUT/002-sec4.csv"
echo "wrote $OUT/002-sec4.csv"
