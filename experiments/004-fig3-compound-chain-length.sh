#!/usr/bin/env bash
# Seed 004, Fig. 3: cycles per packet against chain length for a compound chain (all NFs
# in one process on one core, Snabb there). The paper finds a linear cost of ~35 cycles
# per extra NF for Snabb; sfclab's compound runtime adds what the NF itself costs.
# (The paper's "classical" chains of one VM per NF through Open vSwitch are not
# reproduced here: no VMs on this machine.)
source "$(dirname "$0")/common.sh"
if [ "${QUICK:-0}" = 1 ]; then V=1,2; else V=1,2,4,8,16,32; fi
"$SFCLAB" sweep --chain 'forwarder*{}' --param hops --values "$V" \
  --repeat "$REPEAT" "${TRIAL[@]}" --no-accounting --latency-probe-pps 0 --out "$OUT/004-fig3"
