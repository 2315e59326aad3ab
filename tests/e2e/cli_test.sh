#!/usr/bin/env bash
# End-to-end: the `ocular` binary as a user runs it, on the tiny reference checkpoints.
# Usage: cli_test.sh path/to/ocular   (run from the repository root)
set -uo pipefail
OCULAR=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0

# An OCULAR_ISA this machine cannot run would only add a warning to every run: skip (CTest 77).
if "$OCULAR" run -m testdata/tiny/pg1 -p x --max-tokens 1 2>&1 >/dev/null | grep -q "ignoring OCULAR_ISA"; then
  echo "skipped: OCULAR_ISA=${OCULAR_ISA:-} is not available here"
  exit 77
fi
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

# trace --chat: the prompt as one user turn of the chat template, traced and diffed against
# transformers' run of apply_chat_template (make_mllama.py's chat case); without --chat the
# prompt is raw, and diff names input_ids.
CHAT_IMAGES=(-i testdata/golden/inputs/photo.png -i testdata/golden/inputs/gray.png)
"$OCULAR" trace -m testdata/tiny/mllama --chat "${CHAT_IMAGES[@]}" -p "<|image|><|image|>What differs?" \
  --max-tokens 12 -o "$TMP/chat-trace.safetensors" >/dev/null
check "trace --chat" 0 $?
"$OCULAR" diff "$TMP/chat-trace.safetensors" testdata/golden/mllama/chat.safetensors >"$TMP/diff.txt"
check "diff trace --chat against transformers' chat run" 0 $?
contains "diff trace --chat compares the decode logits" "$TMP/diff.txt" "^decode_logits"
"$OCULAR" trace -m testdata/tiny/mllama "${CHAT_IMAGES[@]}" -p "<|image|><|image|>What differs?" \
  --max-tokens 12 -o "$TMP/raw-trace.safetensors" >/dev/null
"$OCULAR" diff "$TMP/raw-trace.safetensors" testdata/golden/mllama/chat.safetensors >"$TMP/diff.txt"
check "diff of a raw trace against the chat run fails" 1 $?
contains "diff names input_ids" "$TMP/diff.txt" "FIRST DIVERGENCE: input_ids"
contains "diff says which one is the chat turn" "$TMP/diff.txt" "^HINT: B is a chat turn"

# tokenize: loc tokens are atomic.
"$OCULAR" tokenize -m testdata/tiny/pg1 "detect <loc0012> circle" >"$TMP/tok.txt"
check "tokenize" 0 $?
contains "tokenize keeps <loc0012> atomic" "$TMP/tok.txt" '"<loc0012>"'
# After --, a text that looks like an option is text: its tokens' pieces spell it (no help).
for text in --help -p; do
  "$OCULAR" tokenize -m testdata/tiny/pg1 -- "$text" >"$TMP/tok.txt"
  check "tokenize -- $text" 0 $?
  spelled=$(cut -f2 "$TMP/tok.txt" | tr -d '"\n')
  [[ "$spelled" == "$text" ]] && echo "ok: tokenize -- $text tokenizes the text" ||
    { echo "FAIL: tokenize -- $text:"; cat "$TMP/tok.txt"; fails=$((fails + 1)); }
done

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
"$OCULAR" bogus 2>"$TMP/err"
check "unknown command -> 2" 2 $?
contains "unknown command is named" "$TMP/err" "unknown command 'bogus' (the commands: run, "
"$OCULAR" run -m testdata/tiny/pg1 -p x --threads abc 2>"$TMP/err"
check "--threads abc -> 2" 2 $?
contains "--threads abc is not a number" "$TMP/err" "abc is not an integer"
for seed in -1 2e64 18446744073709551616; do
  "$OCULAR" run -m testdata/tiny/pg1 -p x --seed $seed 2>"$TMP/err"
  check "--seed $seed -> 2" 2 $?
done
"$OCULAR" diff testdata/golden/inputs/photo.png testdata/golden/inputs/photo.png 2>"$TMP/err"
check "diff on a PNG -> 4" 4 $?
contains "diff names a PNG as one" "$TMP/err" "not a safetensors file: it is a PNG image"
echo '{"id":0,"image":"a.png","width":5,"height":5,"kind":"ocr","prefix":"p","suffix":"s"}' >"$TMP/kind.jsonl"
"$OCULAR" eval -m models/shapes-paligemma --set "$TMP/kind.jsonl" --images "$TMP" 2>"$TMP/err"
check "eval set with an unknown kind -> 4" 4 $?
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

# ---- The CLI experience (docs/cli.md) on the shapes model: fast, and a real answer. ----
M=models/shapes-paligemma
IMG=$M/sample.png
lacks() {  # lacks "description" file pattern
  if grep -q -- "$3" "$2"; then echo "FAIL: $1: '$3' in output:"; cat "$2"; fails=$((fails + 1)); else echo "ok: $1"; fi
}
same() {  # same "description" file_a file_b
  if cmp -s "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1:"; diff "$2" "$3" | head -20; fails=$((fails + 1)); fi
}

# --json: schema ocular.run/1, one member per line, ids on one line, the image sizes boxes use.
"$OCULAR" run -m $M -i $IMG -p "detect star" --json >"$TMP/det.json" 2>"$TMP/err"
check "run --json" 0 $?
contains "json names its schema first" "$TMP/det.json" '^  "schema": "ocular.run/1",$'
contains "json finish_reason eos" "$TMP/det.json" '^  "finish_reason": "eos",$'
contains "json ids on one line" "$TMP/det.json" '^  "output_ids": \[[0-9,]*\],$'
contains "json prompt ids on one line" "$TMP/det.json" '^  "prompt_ids": \[[0-9,]*\],$'
contains "json image size of the boxes" "$TMP/det.json" '"images": \[{"source":"[^"]*sample.png","width":261,"height":193}\]'
contains "json model facts" "$TMP/det.json" '"model": {"path":"models/shapes-paligemma","architecture":"[^"]*","weight_dtype":"F32","threads":[0-9]*,"isa":"[a-z0-9]*","precision":"f32"'
contains "json timings" "$TMP/det.json" '"timings": {"load_ms":[0-9.e+-]*,"image_ms":[0-9.e+-]*,"prefill_ms"'
contains "json detections in image pixels" "$TMP/det.json" '"detections": \[{"label":"star","x0":61.48'
[[ $(wc -l <"$TMP/det.json") == 14 ]] && echo "ok: json has 12 members, one per line" || { echo "FAIL: json member count"; cat "$TMP/det.json"; fails=$((fails + 1)); }
lacks "no stats on a non-terminal" "$TMP/err" "stats:"
"$OCULAR" run -m $M -i $IMG -p "caption en" --max-tokens 2 --json >"$TMP/len.json"
contains "finish_reason length" "$TMP/len.json" '"finish_reason": "length"'
"$OCULAR" run -m $M -i $IMG -p "caption en" --stop " and" --json >"$TMP/stop.json"
contains "finish_reason stop" "$TMP/stop.json" '"finish_reason": "stop"'
contains "--stop cuts the answer" "$TMP/stop.json" '"answer": "a red square, a blue star",'

# --json-stream: NDJSON, a start event, token events, then the result.
"$OCULAR" run -m $M -i $IMG -p "caption en" --json-stream >"$TMP/stream.ndjson"
check "run --json-stream" 0 $?
contains "stream starts with its schema" <(head -1 "$TMP/stream.ndjson") '^{"event":"start","schema":"ocular.run/1","prompt":"caption en"}$'
contains "stream has token events" "$TMP/stream.ndjson" '^{"event":"token","index":1,"text":" red"}$'
contains "stream ends with the result" <(tail -1 "$TMP/stream.ndjson") '^{"event":"done","schema":"ocular.run/1",.*"finish_reason":"eos"'
[[ $(grep -vc '^{"event":"[a-z]*",.*}$' "$TMP/stream.ndjson") == 0 ]] && echo "ok: every line is one event object" || { echo "FAIL: stream lines"; fails=$((fails + 1)); }
"$OCULAR" run -m $M -i $IMG -p x --json --json-stream >/dev/null 2>&1
check "--json and --json-stream exclude each other -> 2" 2 $?
"$OCULAR" run -m $M -i "$TMP/missing.png" -p x --json-stream >"$TMP/stream.ndjson" 2>/dev/null
check "stream: missing image -> 3" 3 $?
contains "stream reports the error as an event" "$TMP/stream.ndjson" '^{"event":"error","exit_code":3,"message":'

# Progress and summary: only on a terminal, unless asked; --quiet wins.
"$OCULAR" run -m $M -i $IMG -p "caption en" >"$TMP/out" 2>"$TMP/err"
same "text answer" "$TMP/out" <(echo "a red square, a blue star and an orange triangle")
[[ ! -s "$TMP/err" ]] && echo "ok: nothing on stderr off a terminal" || { echo "FAIL: stderr not empty:"; cat "$TMP/err"; fails=$((fails + 1)); }
"$OCULAR" run -m $M -i $IMG -p "caption en" --stats --progress >"$TMP/out" 2>"$TMP/err"
contains "--stats summary" "$TMP/err" '^stats: prompt 68 tok | prefill [0-9.]* tok/s | decode 12 tok, [0-9.]* tok/s | image [0-9]* ms | peak RSS [0-9]* MiB | eos$'
contains "--progress: loading" "$TMP/err" '^ocular: loaded the model in'
contains "--progress: image decode, encode, prefill" "$TMP/err" '^ocular: prefill 68/68 in'
"$OCULAR" run -m $M -i $IMG -p "caption en" --stats --progress -q >"$TMP/out" 2>"$TMP/err"
[[ ! -s "$TMP/err" ]] && echo "ok: --quiet silences stderr" || { echo "FAIL: --quiet:"; cat "$TMP/err"; fails=$((fails + 1)); }
if command -v script >/dev/null; then  # a pseudo-terminal: the summary comes by itself
  script -qec "$OCULAR run -m $M -i $IMG -p 'caption en'" /dev/null >"$TMP/tty" </dev/null
  contains "terminal: summary after the answer" "$TMP/tty" '^stats: prompt 68 tok'
  script -qec "$OCULAR run -m $M -i $IMG -p 'caption en' --quiet" /dev/null >"$TMP/tty" </dev/null
  lacks "terminal: --quiet" "$TMP/tty" 'stats:'
fi

# Images from stdin: the same answer as from the file.
"$OCULAR" run -m $M -i - -p "caption en" <$IMG >"$TMP/stdin.txt"
check "run -i -" 0 $?
same "-i - answers as the file does" "$TMP/stdin.txt" <(echo "a red square, a blue star and an orange triangle")
"$OCULAR" run -m $M -i - -p "caption en" </dev/null 2>"$TMP/err"
check "-i - with empty stdin -> 2" 2 $?

# --chat: one load, prompts line by line, /image, /help, unknown commands, works piped.
printf '%s\n' "answer en what color is the star?" "/image $IMG" "caption en" "/bogus" "" \
  "/help" "answer en what color is the star?" "/image" "/quit" "caption en" |
  "$OCULAR" run -m $M --chat >"$TMP/chat.out" 2>&1
check "chat: an unknown command makes the exit code 2" 2 $?
sed -n 2p "$TMP/chat.out" | grep -qx "a red square, a blue star and an orange triangle" && echo "ok: chat: /image applies" || { echo "FAIL: chat /image:"; cat "$TMP/chat.out"; fails=$((fails + 1)); }
# stdout is flushed before each stderr message, so the error follows the answer before it.
sed -n 3p "$TMP/chat.out" | grep -q "^error: \[cli\] unknown command /bogus" && echo "ok: chat: stdout flushed before stderr" || { echo "FAIL: chat order:"; cat "$TMP/chat.out"; fails=$((fails + 1)); }
contains "chat: /help" "$TMP/chat.out" "^  /image PATH"
sed -n '$p' "$TMP/chat.out" | grep -qx "blue" && echo "ok: chat: answers with the image, stops at /quit" || { echo "FAIL: chat end:"; cat "$TMP/chat.out"; fails=$((fails + 1)); }
printf 'caption en\n' | "$OCULAR" run -m $M --chat -i $IMG --json >"$TMP/chat.json"
contains "chat --json" "$TMP/chat.json" '"answer": "a red square, a blue star and an orange triangle"'
echo "caption en" | "$OCULAR" run -m $M --chat -i - 2>"$TMP/err"
check "chat with -i - -> 2" 2 $?
cp $IMG "$TMP/with space.png"
printf '%s\n' "/image $TMP/with space.png" "answer en what color is the star?" |
  "$OCULAR" run -m $M --chat >"$TMP/chat.out"
same "chat: /image of a name with a space" "$TMP/chat.out" <(echo blue)
printf '/image %s\n' "$TMP/missing.png" | "$OCULAR" run -m $M --chat 2>"$TMP/err"
check "chat: /image of a missing file -> 3" 3 $?
"$OCULAR" run -m $M -i $IMG 2>"$TMP/err"
check "run without --prompt or --chat -> 2" 2 $?

# --draw is checked before generating (nothing printed) and never overwrites an input.
"$OCULAR" run -m $M -i $IMG -p "detect star" --draw "$TMP/no/dir/x.png" >"$TMP/out" 2>"$TMP/err"
check "--draw into a missing folder -> 3" 3 $?
[[ ! -s "$TMP/out" ]] && echo "ok: --draw checked before generating" || { echo "FAIL: generated before checking --draw"; fails=$((fails + 1)); }
cp $IMG "$TMP/in.png"
"$OCULAR" run -m $M -i "$TMP/in.png" -p "detect star" --draw "$TMP/in.png" >"$TMP/out" 2>"$TMP/err"
check "--draw onto the input -> 2" 2 $?
same "--draw left the input alone" $IMG "$TMP/in.png"
"$OCULAR" run -m $M -i $IMG -p "detect star" --draw "$TMP/d.png" >"$TMP/out" 2>&1
sed -n 2p "$TMP/out" | grep -q "^wrote $TMP/d.png (1 box)" && echo "ok: --draw message after the answer" || { echo "FAIL: --draw order:"; cat "$TMP/out"; fails=$((fails + 1)); }

# segment: masks (COCO RLE over the whole image) in --json, painted by --draw.
"$OCULAR" run -m $M -i $IMG -p "segment star ; triangle" --json --draw "$TMP/seg.png" >"$TMP/seg.json" 2>"$TMP/err"
check "run segment --json --draw" 0 $?
[[ $(grep -o '"mask":{"counts":\[[0-9,]*\],"size":\[193,261\]}' "$TMP/seg.json" | wc -l) == 2 ]] && echo "ok: segment json has a mask per object" || { echo "FAIL: segment masks:"; cat "$TMP/seg.json"; fails=$((fails + 1)); }
contains "segment json keeps the seg codes" "$TMP/seg.json" '"seg":\[[0-9]*\(,[0-9]*\)\{15\}\]'
contains "segment --draw counts the masks" "$TMP/err" "^wrote $TMP/seg.png (2 boxes, 2 masks)$"

# tokenize --prompt: the whole prompt run builds, token by token.
"$OCULAR" tokenize -m $M --prompt "caption en" -i x.png >"$TMP/tok.txt"
check "tokenize --prompt" 0 $?
contains "tokenize --prompt: image tokens" "$TMP/tok.txt" $'^0-63\t1600\t"<image>" x64$'
contains "tokenize --prompt: BOS" "$TMP/tok.txt" $'^64\t2\t"<bos>"$'
contains "tokenize --prompt: newline separator" "$TMP/tok.txt" $'^67\t14\t"<0x0A>"$'
contains "tokenize --prompt: as many tokens as run's prompt" "$TMP/tok.txt" "^# 68 tokens"
# --chat renders the checkpoint's template, or --chat-template FILE's; a construct the renderer
# lacks is refused (exit 5) with its line.
"$OCULAR" tokenize -m testdata/tiny/gemma3-text --prompt "hi" --chat >"$TMP/tok.txt"
check "tokenize --chat" 0 $?
contains "tokenize --chat: the template's turn" "$TMP/tok.txt" '"<start_of_turn>"'
printf '{{ bos_token }}<end_of_turn>{{ messages[0].content|upper }}' >"$TMP/t.jinja"
"$OCULAR" tokenize -m testdata/tiny/gemma3-text --prompt "hi" --chat --chat-template "$TMP/t.jinja" >"$TMP/tok.txt"
check "tokenize --chat-template" 0 $?
contains "tokenize --chat-template: its text" "$TMP/tok.txt" '"<end_of_turn>"'
printf '{{ bos_token }}\n{%% include "x" %%}' >"$TMP/t.jinja"
"$OCULAR" tokenize -m testdata/tiny/gemma3-text --prompt "hi" --chat --chat-template "$TMP/t.jinja" 2>"$TMP/err"
check "--chat-template with {% include %} -> 5" 5 $?
contains "--chat-template refusal names the construct" "$TMP/err" 'chat-template:2: unsupported construct'
"$OCULAR" tokenize -m $M --prompt "caption en" >"$TMP/tok.txt"
contains "tokenize --prompt, no image: BOS first" "$TMP/tok.txt" $'^0\t2\t"<bos>"$'
"$OCULAR" tokenize -m $M 2>"$TMP/err"
check "tokenize without text -> 2" 2 $?

# --help: defaults, only the options that apply, the environment.
"$OCULAR" run --help >"$TMP/help.txt"
contains "run --help shows defaults" "$TMP/help.txt" "--max-tokens INT:INT in \[0 - 1048576\]=64"
contains "run --help lists OCULAR_ISA" "$TMP/help.txt" "OCULAR_ISA="
contains "run --help lists OCULAR_THREADS" "$TMP/help.txt" "OCULAR_THREADS="
"$OCULAR" tokenize --help >"$TMP/help.txt"
lacks "tokenize --help: no compute options" "$TMP/help.txt" "--precision"
lacks "tokenize --help: no image options" "$TMP/help.txt" "--max-image-pixels"
lacks "tokenize --help: no processor bounds" "$TMP/help.txt" "--max-pixels"
"$OCULAR" bench --help >"$TMP/help.txt"
lacks "bench --help: no image options" "$TMP/help.txt" "--exif-rotate"
contains "bench --help: threads" "$TMP/help.txt" "--threads"
contains "bench --help: the processor's bounds" "$TMP/help.txt" "--max-pixels"

# README's eval example, on the one held-out image shipped (sample.png is scene 22).
mkdir -p "$TMP/heldout"
cp $IMG "$TMP/heldout/0022.png"
grep '"id": 22,' $M/heldout.jsonl >"$TMP/set.jsonl"
"$OCULAR" eval -m $M --set "$TMP/set.jsonl" --images "$TMP/heldout" >"$TMP/eval.json" 2>"$TMP/err"
check "eval on a held-out image" 0 $?
contains "eval scores it" "$TMP/eval.json" '"num_examples": 1'
[[ ! -s "$TMP/err" ]] && echo "ok: eval: no progress off a terminal" || { echo "FAIL: eval stderr:"; cat "$TMP/err"; fails=$((fails + 1)); }
"$OCULAR" eval -m $M --set "$TMP/set.jsonl" --images "$TMP/heldout" --progress >/dev/null 2>"$TMP/err"
contains "eval --progress" "$TMP/err" "^ocular: eval 1/1$"
contains "README says how to make the held-out images" README.md "tools.demo_model.shapes --set models/shapes-paligemma/heldout.jsonl"

# Llama 3.2 Vision: two images in one chat turn, as transformers answers it (golden
# testdata/golden/mllama/chat.safetensors); text-only; clear errors.
L=testdata/tiny/mllama
"$OCULAR" run -m $L -i testdata/golden/inputs/photo.png -i testdata/golden/inputs/gray.png \
  -p "<|image|><|image|>What differs?" --chat --max-tokens 12 --json </dev/null >"$TMP/ml.json" 2>"$TMP/err"
check "mllama: two images, --chat" 0 $?
contains "mllama: transformers' greedy answer" "$TMP/ml.json" '"output_ids": \[34,38,138,414,239,422,298,34,98,123,138,22\]'
contains "mllama: the chat template" "$TMP/ml.json" '"prompt_ids": \[420,422,'
"$OCULAR" run -m $L -p "what color is the square?" --max-tokens 8 --json >"$TMP/ml.json" 2>"$TMP/err"
check "mllama: text-only" 0 $?
contains "mllama: text-only answer" "$TMP/ml.json" '"output_ids": \[46,234,142,293,69,293,69,380\]'
"$OCULAR" run -m $L -i testdata/golden/inputs/photo.png -p "no marker" 2>"$TMP/err"
check "mllama: images without <|image|> markers -> 2" 2 $?
contains "mllama: says so" "$TMP/err" "0 <|image|> markers but 1 images"
five=(); for i in 1 2 3 4 5; do five+=(-i testdata/golden/inputs/photo.png); done
"$OCULAR" run -m $L "${five[@]}" -p "<|image|><|image|><|image|><|image|><|image|>" 2>"$TMP/err"
check "mllama: five images -> 2" 2 $?
contains "mllama: at most 4" "$TMP/err" "at most 4 per prompt"
printf 'GIF89a' >"$TMP/bad.gif"
"$OCULAR" run -m $L -i "$TMP/bad.gif" -p "<|image|>x" 2>"$TMP/err"
check "mllama: malformed image -> 4" 4 $?
# ... from a GGUF file: the same answer in the checkpoint's float type; q8_0 runs; bench.
"$OCULAR" quantize -q -m $L -o "$TMP/ml.gguf" --type f32
check "mllama: quantize --type f32" 0 $?
"$OCULAR" run -m "$TMP/ml.gguf" -i testdata/golden/inputs/photo.png -i testdata/golden/inputs/gray.png \
  -p "<|image|><|image|>What differs?" --chat --max-tokens 12 --json </dev/null >"$TMP/ml.json" 2>"$TMP/err"
check "mllama: run the GGUF" 0 $?
contains "mllama: GGUF gives transformers' answer" "$TMP/ml.json" '"output_ids": \[34,38,138,414,239,422,298,34,98,123,138,22\]'
"$OCULAR" quantize -q -m $L -o "$TMP/ml8.gguf" --type q8_0 --vision q8_0
check "mllama: quantize q8_0 --vision q8_0" 0 $?
"$OCULAR" bench -m "$TMP/ml8.gguf" --decode-tokens 2 --prompt-tokens 4 --roofline-gbs 10 >"$TMP/bench.json" 2>"$TMP/err"
check "mllama: bench the GGUF" 0 $?
contains "mllama: bench times every tile" "$TMP/bench.json" '"vision_tiles": 4'
contains "bench reports int8 activations by default" "$TMP/bench.json" '"quant_activations": "int8"'
"$OCULAR" bench -m "$TMP/ml8.gguf" --decode-tokens 2 --prompt-tokens 4 --roofline-gbs 10 \
  --quant-activations f32 >"$TMP/bench.json" 2>"$TMP/err"
check "mllama: bench --quant-activations f32" 0 $?
contains "bench reports f32 activations" "$TMP/bench.json" '"quant_activations": "f32"'
"$OCULAR" run -m "$TMP/ml8.gguf" -p "what color is the square?" --max-tokens 4 \
  --quant-activations f32 --json >"$TMP/ml.json" 2>"$TMP/err"
check "mllama: run --quant-activations f32" 0 $?
contains "run reports f32 activations" "$TMP/ml.json" '"quant_activations":"f32"'
contains "run names a quantized file's weights quantized" "$TMP/ml.json" '"weight_dtype":"quantized"'
"$OCULAR" run -m "$TMP/ml8.gguf" -p "x" --quant-activations int4 2>"$TMP/err"
check "--quant-activations int4 -> 2" 2 $?
contains "names the choices" "$TMP/err" "int8"
rm -f "$TMP/ml.gguf" "$TMP/ml8.gguf"

# llama.cpp's pair: its text GGUF and mmproj file (tools/reference/make_llamacpp_pair.py), as
# `llama-mtmd-cli -m TEXT --mmproj MMPROJ` takes them: trace equals transformers' taps; bench
# runs; an mmproj for another hidden size is refused (exit 5), the text file as --mmproj too.
P=testdata/llamacpp
"$OCULAR" trace -m $P/gemma3-lc-f16.gguf --mmproj $P/mmproj-gemma3-lc-f16.gguf \
  -i testdata/golden/inputs/photo.png -p "<start_of_image> caption en" --max-tokens 8 \
  -o "$TMP/lc.safetensors" >/dev/null
check "trace, llama.cpp pair" 0 $?
"$OCULAR" diff "$TMP/lc.safetensors" testdata/golden/gemma3-lc/photo.safetensors >"$TMP/diff.txt"
check "diff, llama.cpp pair within tolerance" 0 $?
contains "diff, llama.cpp pair compares the projector" "$TMP/diff.txt" "^projector"
"$OCULAR" bench -m $P/gemma3-lc-f16.gguf --mmproj $P/mmproj-gemma3-lc-f16.gguf \
  --decode-tokens 2 --prompt-tokens 4 --roofline-gbs 10 >"$TMP/bench.json" 2>"$TMP/err"
check "bench, llama.cpp pair" 0 $?
"$OCULAR" run -m testdata/gguf/gemma3_270m_slice.gguf --mmproj $P/mmproj-gemma3-lc-f16.gguf \
  -p x 2>"$TMP/err"
check "mmproj of another hidden size -> 5" 5 $?
contains "names the key" "$TMP/err" "clip.vision.projection_dim = 48"
"$OCULAR" run -m $P/gemma3-lc-f16.gguf --mmproj $P/gemma3-lc-f16.gguf -p x 2>"$TMP/err"
check "a text GGUF as --mmproj -> 2" 2 $?
# The same pair written by `ocular quantize --mmproj-out` from the HF checkpoint: trace equals
# transformers' taps; a checkpoint llama.cpp's files cannot express is refused (exit 5).
"$OCULAR" quantize -q -m testdata/tiny/gemma3-lc -o "$TMP/lcw.gguf" --mmproj-out "$TMP/lcw-mm.gguf" \
  --type f16
check "quantize --mmproj-out" 0 $?
"$OCULAR" trace -m "$TMP/lcw.gguf" --mmproj "$TMP/lcw-mm.gguf" \
  -i testdata/golden/inputs/photo.png -p "<start_of_image> caption en" --max-tokens 8 \
  -o "$TMP/lcw.safetensors" >/dev/null
check "trace, pair written by ocular" 0 $?
"$OCULAR" diff "$TMP/lcw.safetensors" testdata/golden/gemma3-lc/photo.safetensors >"$TMP/diff.txt"
check "diff, pair written by ocular within tolerance" 0 $?
"$OCULAR" quantize -q -m testdata/tiny/gemma3 -o "$TMP/x.gguf" --mmproj-out "$TMP/x-mm.gguf" \
  2>"$TMP/err"
check "quantize --mmproj-out, inexpressible -> 5" 5 $?
contains "names the key" "$TMP/err" "query_pre_attn_scalar"
rm -f "$TMP/lcw.gguf" "$TMP/lcw-mm.gguf"
# Qwen2.5-VL's pair (tools/reference/make_llamacpp_qwen_pair.py): trace equals transformers'
# taps (window attention included); a Gemma 3 mmproj with a Qwen2-VL text file is refused.
"$OCULAR" trace -m $P/qwen25vl-lc-f16.gguf --mmproj $P/mmproj-qwen25vl-lc-f16.gguf \
  -i testdata/golden/qwen25vl-lc/wide.png -p "<|vision_start|><|image_pad|><|vision_end|>describe" \
  --max-tokens 8 -o "$TMP/qlc.safetensors" >/dev/null
check "trace, llama.cpp Qwen2.5-VL pair" 0 $?
"$OCULAR" diff "$TMP/qlc.safetensors" testdata/golden/qwen25vl-lc/wide.safetensors >"$TMP/diff.txt"
check "diff, llama.cpp Qwen2.5-VL pair within tolerance" 0 $?
contains "diff, Qwen2.5-VL pair compares the vision tower" "$TMP/diff.txt" "^vision.layers.2"
# Qwen3-VL's pair: the DeepStack taps too.
"$OCULAR" trace -m $P/qwen3vl-lc-f16.gguf --mmproj $P/mmproj-qwen3vl-lc-f16.gguf \
  -i testdata/golden/inputs/photo.png \
  -p "<|vision_start|><|image_pad|><|vision_end|>describe this picture" \
  --max-tokens 8 -o "$TMP/q3lc.safetensors" >/dev/null
check "trace, llama.cpp Qwen3-VL pair" 0 $?
"$OCULAR" diff "$TMP/q3lc.safetensors" testdata/golden/qwen3vl-lc/one.safetensors >"$TMP/diff.txt"
check "diff, llama.cpp Qwen3-VL pair within tolerance" 0 $?
contains "diff, Qwen3-VL pair compares DeepStack" "$TMP/diff.txt" "^vision.deepstack.1"
"$OCULAR" run -m $P/qwen2vl-lc-f16.gguf --mmproj $P/mmproj-gemma3-lc-f16.gguf -p x 2>"$TMP/err"
check "a Gemma 3 mmproj with a Qwen2-VL text file -> 5" 5 $?
contains "names the key" "$TMP/err" "clip.projector_type 'gemma3'"

# Chat templates (docs/models.md §11). Gemma 3, two images in one --chat turn: the ids of
# transformers' apply_chat_template (testdata/chat/goldens.json, gemma3 "two_images").
G=testdata/tiny/gemma3
"$OCULAR" run -m $G -i testdata/golden/inputs/photo.png -i testdata/golden/inputs/gray.png \
  -p "What differs?" --chat --max-tokens 4 --json </dev/null >"$TMP/g3.json" 2>"$TMP/err"
check "gemma3: two images, --chat" 0 $?
contains "gemma3: the chat template's ids" "$TMP/g3.json" \
  '"prompt_ids": \[2,2052,742,730,278,14,14,14,2049,2051,2051,2051,2051,2050,14,14,14,14,2049,2051,2051,2051,2051,2050,14,14,503,298,733,751,751,370,747,2053,14,2052,744,613,735,14\]'
# The REPL keeps the conversation: the second turn's prompt holds the first turn and its answer.
printf 'Hello there\nAnd 3+3?\n' | "$OCULAR" run -m testdata/tiny/gemma3-text --chat --max-tokens 3 \
  --json >"$TMP/g3t.json" 2>"$TMP/err"
check "gemma3: multi-turn --chat" 0 $?
first=$(grep -o '"prompt_ids": \[[0-9,]*' "$TMP/g3t.json" | sed -n 1p | sed 's/.*\[//')
second=$(grep -o '"prompt_ids": \[[0-9,]*' "$TMP/g3t.json" | sed -n 2p | sed 's/.*\[//')
[[ "$first" == "2,2052,742,730,278,14,757,629,514,2053,14,2052,744,613,735,14" && "$second" == "$first",* ]] \
  && echo "ok: gemma3: the second turn follows the first" \
  || { echo "FAIL: gemma3 turns: '$first' / '$second'"; fails=$((fails + 1)); }
printf 'x\n/reset\nHello there\n' | "$OCULAR" run -m testdata/tiny/gemma3-text --chat --max-tokens 1 \
  --json >"$TMP/g3t.json" 2>"$TMP/err"
grep '"prompt_ids"' "$TMP/g3t.json" | sed -n 2p | grep -q '"prompt_ids": \[2,2052,742,730,278,14,757,629,514,2053,14,2052,744,613,735,14\]' \
  && echo "ok: gemma3: /reset" || { echo "FAIL: /reset"; cat "$TMP/g3t.json"; fails=$((fails + 1)); }
# Any template renders; one with a construct ocular lacks is refused, never approximated.
cp -r testdata/tiny/gemma3-text "$TMP/g3x"
printf '{{ bos_token }}{{ messages[0].content }}' >"$TMP/g3x/chat_template.jinja"
"$OCULAR" run -m "$TMP/g3x" -p "hi" --chat --max-tokens 1 </dev/null >/dev/null 2>"$TMP/err"
check "an edited chat template renders" 0 $?
printf '{{ bos_token }}{{ messages[0].content|wordwrap(3) }}' >"$TMP/g3x/chat_template.jinja"
"$OCULAR" run -m "$TMP/g3x" -p "hi" --chat </dev/null 2>"$TMP/err"
check "a template with a construct ocular lacks -> 5" 5 $?
contains "that template: names the construct" "$TMP/err" "unsupported construct: filter 'wordwrap'"
"$OCULAR" run -m "$TMP/g3x" -p "hi" --max-tokens 1 >/dev/null 2>"$TMP/err"
check "that template: a plain prompt still runs" 0 $?

# Qwen-VL --chat: the checkpoint's template around one image and the text (golden
# testdata/golden/{qwen2vl,qwen3vl}/chat.safetensors): transformers' ids and greedy tokens.
# Qwen2-VL's template adds its default system turn; Qwen3-VL's does not.
Q2=testdata/tiny/qwen2vl
"$OCULAR" run -m $Q2 -i testdata/golden/inputs/photo.png -p "describe this picture" --chat \
  --max-tokens 12 --json </dev/null >"$TMP/qw.json" 2>"$TMP/err"
check "qwen2vl: --chat with an image" 0 $?
contains "qwen2vl: the template's system turn" "$TMP/qw.json" '"prompt_ids": \[401,82,88,82,287,76,198,56,'
contains "qwen2vl: transformers' greedy answer" "$TMP/qw.json" '"output_ids": \[245,407,291,456,318,116,437,305,235,301,44,63\]'
"$OCULAR" run -m testdata/tiny/qwen3vl -i testdata/golden/inputs/photo.png \
  -p "describe this picture" --chat --max-tokens 12 --json </dev/null >"$TMP/qw.json" 2>"$TMP/err"
check "qwen3vl: --chat with an image" 0 $?
contains "qwen3vl: the user turn first" "$TMP/qw.json" '"prompt_ids": \[401,84,82,275,198,403,405,405,'
contains "qwen3vl: transformers' greedy answer" "$TMP/qw.json" '"output_ids": \[169,408,107,107,107,107,107,107,107,107,107,107\]'
# ... from a GGUF written by `ocular quantize` (its chat template embedded): the f32 file
# gives the same answer; q8_0 with the tower in q8_0 runs.
"$OCULAR" quantize -q -m testdata/tiny/qwen3vl -o "$TMP/q3.gguf" --type f32
check "qwen3vl: quantize --type f32" 0 $?
"$OCULAR" run -m "$TMP/q3.gguf" -i testdata/golden/inputs/photo.png -p "describe this picture" \
  --chat --max-tokens 12 --json </dev/null >"$TMP/qw.json" 2>"$TMP/err"
check "qwen3vl: run the GGUF" 0 $?
contains "qwen3vl: GGUF gives transformers' answer" "$TMP/qw.json" '"output_ids": \[169,408,107,107,107,107,107,107,107,107,107,107\]'
"$OCULAR" quantize -q -m $Q2 -o "$TMP/q2.gguf" --type q8_0 --vision q8_0
check "qwen2vl: quantize q8_0 --vision q8_0" 0 $?
"$OCULAR" run -m "$TMP/q2.gguf" -i testdata/golden/inputs/photo.png -p "describe this picture" \
  --chat --max-tokens 4 </dev/null >/dev/null 2>"$TMP/err"
check "qwen2vl: run the q8_0 GGUF" 0 $?
"$OCULAR" tokenize -m $Q2 --prompt "hi" --chat >"$TMP/tok.txt"
check "qwen2vl: tokenize --chat" 0 $?
contains "qwen2vl: tokenize --chat: the template's turn" "$TMP/tok.txt" '"<|im_start|>"'

echo "$fails failure(s)"
[[ $fails == 0 ]]
