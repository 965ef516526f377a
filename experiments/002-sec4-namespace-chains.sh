#!/usr/bin/env bash
# Seed 002, Section IV, on its own testbed's terms: chains of n forwarders, each hop a
# network namespace joined to the next by veth, the kernel forwarding in each (`linux`)
# against sfclab forwarders doing AF_XDP in each (`veth`) and sfclab hop processes
# joined by memif (`memif`: no kernel on the path), throughput against offered
# load. The paper saw the Linux chain lose throughput past its peak (software drops
# waste the cycles spent on dropped frames); this script measures both on this host.
# Needs root (namespaces, AF_XDP); says skipped otherwise.
source "$(dirname "$0")/common.sh"
if [ "$(id -u)" != 0 ]; then echo "skipped: needs root (namespaces, AF_XDP)"; exit 0; fi
mkdir -p "$OUT/002-sec4-ns"
if [ "${QUICK:-0}" = 1 ]; then N="1 3"; RATES=20kpps,2Mpps; else N="1 3 5 10"; RATES=50kpps,100kpps,150kpps,200kpps,300kpps,400kpps,600kpps,1Mpps,4Mpps; fi
for chaining in linux veth memif; do
  for n in $N; do
    "$SFCLAB" sweep --chaining "$chaining" --chain "forwarder*$n" --param rate --values "$RATES" \
      "${TRIAL[@]}" --out "$OUT/002-sec4-ns/$chaining-n$n" > /dev/null
    echo "wrote $OUT/002-sec4-ns/$chaining-n$n"
  done
done
