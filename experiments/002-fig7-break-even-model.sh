#!/usr/bin/env bash
# Seed 002, Fig. 7 and Eq. 3, predicted against measured: the break-even chain length n0
# from which two cores in Block-Interleaving (bi:2) forward more than one (s_core). The
# model predicts it from a calibration (each core's cycles: the stage's generator or sink,
# its side of the ring, its forwarders); bench placement measures it on the same machine.
source "$(dirname "$0")/common.sh"
if [ "${QUICK:-0}" = 1 ]; then
  LENGTHS=(2 4 8 16); SIZES=64
else
  LENGTHS=(1 2 4 6 8 12 16 24 32 48); SIZES=64,512,1518
fi
mkdir -p "$OUT"
CAL="$OUT/002-fig7-calibration.json"
"$SFCLAB" model calibrate --only-chains --chain forwarder --sizes "$SIZES" --repeat "$REPEAT" "${TRIAL[@]}" -o "$CAL" > /dev/null
rows="$OUT/002-fig7-model.csv"
echo "hops,placement,predicted_mpps" > "$rows"
for n in "${LENGTHS[@]}"; do
  for p in s_core bi:2; do
    mpps=$("$SFCLAB" model predict --calibration "$CAL" --chain "forwarder*$n" --placement "$p" --size 64 --json \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_mpps"])')
    echo "$n,$p,$mpps" >> "$rows"
  done
done
lengths=$(IFS=,; echo "${LENGTHS[*]}")
"$SFCLAB" bench placement --lengths "$lengths" --repeat "$REPEAT" "${TRIAL[@]}" --json > "$OUT/002-fig7-measured.json"
python3 - "$rows" "$OUT/002-fig7-measured.json" <<'PY'
import csv, json, sys
pred = {}
for r in csv.DictReader(open(sys.argv[1])):
    pred[(int(r["hops"]), r["placement"])] = float(r["predicted_mpps"])
meas = json.load(open(sys.argv[2]))
mpps = {(p["hops"], p["placement"]): p["mpps"] for p in meas["points"]}
lengths = sorted({n for n, _ in pred})
def n0(table):
    wins = [(n, table[(n, "bi:2")] > table[(n, "s_core")]) for n in lengths if (n, "bi:2") in table and (n, "s_core") in table]
    last_loss = max((i for i, (_, w) in enumerate(wins) if not w), default=None)
    if last_loss is None:
        return wins[0][0] if wins else None
    return wins[last_loss + 1][0] if last_loss + 1 < len(wins) else None
print(f"{'hops':>5} {'s_core pred':>12} {'meas':>8} {'bi:2 pred':>10} {'meas':>8}  (Mpps)")
for n in lengths:
    print(f"{n:>5} {pred[(n,'s_core')]:>12.2f} {mpps.get((n,'s_core'), float('nan')):>8.2f} {pred[(n,'bi:2')]:>10.2f} {mpps.get((n,'bi:2'), float('nan')):>8.2f}")
print(f"break-even n0 (bi:2 over s_core, from the lengths run): predicted {n0(pred)}, measured {n0(mpps)}")
PY
echo "wrote $rows and $OUT/002-fig7-measured.json"
