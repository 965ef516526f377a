#!/usr/bin/env bash
# Seed 000, Fig. 3 and Section V: the resource-constraints model of software-linked and
# NIC-switched (SR-IOV) chains. Every resource's capacity (CPU f_CPU / C_CPU, the NIC's
# line lr / s and engine f_NIC / C_NIC, PCIe bw / (s + delta) once or n times) over chain
# length n = 1..8 and frame size 64..1518 B on the paper's hardware (preset x520: Xeon
# E5-2640 v2 at 2.0 GHz, X520 on PCIe 2.0 x8), with CPU costs calibrated on this machine;
# then, with root, the same kind of chains on this machine predicted and measured.
# The paper: NIC-switched chains are slower (2n I/O operations) and, with efficient
# (DPDK) NFs, the NIC's switching engine and the bus become their bottleneck.
source "$(dirname "$0")/common.sh"
mkdir -p "$OUT"
CAL="$OUT/000-sec5-calibration.json"
"$SFCLAB" model calibrate --only-chains --chain 'noop -> forwarder' --sizes 64,512,1518 --repeat "$REPEAT" "${TRIAL[@]}" -o "$CAL" > /dev/null
# Receive + send as the compound base here (in-memory ports: a lower bound on a NIC
# driver's), each NF a forwarder, each software link a call: efficient NFs, as DPDK's.
"$SFCLAB" model rc --hardware x520 --calibration "$CAL" --csv > "$OUT/000-sec5-x520.csv"
"$SFCLAB" model rc --hardware x520 --calibration "$CAL" --lengths 1,2,4,8 --sizes 64,256,1518
# The same with the per-packet costs of a kernel NF (ixgbe + OvS, ~1,500 cycles: seed 000
# Table I puts an OvS bridge at ~1 Mpps per 2 GHz core): the CPU limits every cell.
"$SFCLAB" model rc --hardware x520 --rx-cycles 400 --tx-cycles 400 --nf-cycles 700 --link-cycles 300 \
  --lengths 1,2,4,8 --sizes 64,1518 --csv > "$OUT/000-sec5-x520-kernel.csv"
if [ "$(id -u)" = 0 ]; then
  if [ "${QUICK:-0}" = 1 ]; then TECH=veth; else TECH=veth,nic-switch; fi
  "$SFCLAB" bench model --technologies "$TECH" --sizes 64 --repeat "$REPEAT" "${TRIAL[@]}" --json > "$OUT/000-sec5-this-machine.json"
  echo "wrote $OUT/000-sec5-this-machine.json (predicted vs measured, chains in namespaces)"
else
  echo "skipped: predicted vs measured chains in namespaces need root"
fi
echo "wrote $OUT/000-sec5-x520.csv and $OUT/000-sec5-x520-kernel.csv"
