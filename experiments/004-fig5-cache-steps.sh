#!/usr/bin/env bash
# Seed 004, Fig. 5: a synthetic NF reading its working set at random offsets, 100 reads
# per packet; cycles per packet step up when the working set outgrows L1, L2 and L3
# (the paper: about doubling at each level on a Xeon E3 with 32 KiB / 256 KiB / 8 MiB).
# sfclab's reads are dependent (one random cycle through the set): latency-bound steps.
source "$(dirname "$0")/common.sh"
if [ "${QUICK:-0}" = 1 ]; then V=8KiB,1MiB; else V=8KiB,32KiB,64KiB,256KiB,1MiB,2MiB,8MiB,32MiB,128MiB; fi
"$SFCLAB" sweep --chain 'synthetic(accesses=100,working_set={})' --param working_set \
  --values "$V" \
  --repeat "$REPEAT" "${TRIAL[@]}" --latency-probe-pps 1000 --out "$OUT/004-fig5"
