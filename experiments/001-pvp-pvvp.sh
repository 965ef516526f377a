#!/usr/bin/env bash
# Seed 001, PVP against PVVP: one forwarder between the "physical" ports against two
# chained through the NIC's switch (each frame crosses it twice as often). The paper
# found PVVP at about half of PVP. Here the NIC is emulated (macvlan, VEB). Needs root;
# says skipped otherwise.
source "$(dirname "$0")/common.sh"
if [ "$(id -u)" != 0 ]; then echo "skipped: needs root (namespaces, AF_XDP)"; exit 0; fi
mkdir -p "$OUT"
"$SFCLAB" bench chaining --technologies nic-switch --lengths 1,2 --repeat "$REPEAT" "${TRIAL[@]}" --json > "$OUT/001-pvp-pvvp.json"
echo "wrote $OUT/001-pvp-pvvp.json"
