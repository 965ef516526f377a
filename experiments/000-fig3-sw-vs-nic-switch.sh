#!/usr/bin/env bash
# Seed 000, Fig. 3: software-linked chains (each hop joined to the next by veth) against
# NIC-switched chains (every hop with its own virtual functions of one switch, frames
# crossing it after every hop: 2n I/O operations), n = 1..5 forwarders, the tester
# offering more than either forwards. The paper found the SW-linked chain faster for
# short chains on its NIC and the NIC-switched one flat under overload; here the NIC is
# emulated (macvlan bridge mode), so the switch's cost is the kernel's, not a NIC's.
# The memif row is the software link without the kernel: hop processes joined by
# shared memory.
# Needs root; says skipped otherwise.
source "$(dirname "$0")/common.sh"
if [ "$(id -u)" != 0 ]; then echo "skipped: needs root (namespaces, AF_XDP)"; exit 0; fi
mkdir -p "$OUT"
if [ "${QUICK:-0}" = 1 ]; then L=1,2; else L=1,2,3,4,5; fi
"$SFCLAB" bench chaining --technologies veth,nic-switch,memif --lengths "$L" --repeat "$REPEAT" "${TRIAL[@]}" --json --plot "$OUT/000-fig3.svg" > "$OUT/000-fig3.json"
echo "wrote $OUT/000-fig3.json and .svg"
