#!/usr/bin/env bash
# Seed 004, Fig. 3/4 on this host: the same chains of n forwarders chained by function
# calls (compound, one namespace), by veth between namespaces (sfclab AF_XDP in each),
# by Open vSwitch bridges, by the kernel, and by memif between hop processes (each NF
# isolated as one-NF-per-VM chains are, but joined by shared memory), the same tester
# program for all (its link is memif for the memif chains). The paper found
# compound chains growing linearly in cycles and classical (VM, OVS) chains far worse.
# Needs root; OVS says skipped where it is not installed.
source "$(dirname "$0")/common.sh"
if [ "$(id -u)" != 0 ]; then echo "skipped: needs root (namespaces, AF_XDP)"; exit 0; fi
mkdir -p "$OUT"
if [ "${QUICK:-0}" = 1 ]; then L=1,2; else L=1,2,3,5,10; fi
"$SFCLAB" bench chaining --technologies compound,veth,ovs,linux,memif --lengths "$L" --repeat "$REPEAT" "${TRIAL[@]}" --json --plot "$OUT/004-fig3-chaining.svg" > "$OUT/004-fig3-chaining.json"
echo "wrote $OUT/004-fig3-chaining.json and .svg"
