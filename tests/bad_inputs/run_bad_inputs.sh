#!/usr/bin/env bash
# The bad-input corpus: runs the `ocular` binary as a user would on corrupt configs, malformed
# JSON, special files (FIFOs, links to /dev/zero, directories), oversized or damaged images and
# absurd options. Every case must
#   - end within $TIMEOUT seconds (no hang),
#   - not abort (no "terminate called", no signal, no sanitizer report),
#   - exit with its documented code (README: 2 bad argument / undecodable input, 3 not found or
#     unreadable, 4 corrupt file, 5 unsupported, 6 over a limit; diff: 1 over tolerance, 2 no
#     tap in common),
#   - print a message naming the file, field or flag (a pattern checked on stderr).
# Controls (class "accepted") check that valid but unusual inputs still work (exit 0).
# Cases are built at run time from the tiny checkpoint testdata/tiny/pg2 (linked, not copied)
# and the committed images, so the corpus needs no large files.
# Usage: run_bad_inputs.sh path/to/ocular   (from the repository root)
set -uo pipefail
OCULAR=$1
TIMEOUT=${BAD_INPUT_TIMEOUT:-30}
ROOT=$(pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BASE=$ROOT/testdata/tiny/pg2
IMG=$ROOT/testdata/golden/inputs/photo.png

fails=0
declare -A n_class ok_class
WRAP=()  # a command the binary runs under (e.g. a resource limit), usually none

# expect CLASS NAME RC PATTERN -- ARGS...: runs ocular ARGS and checks the outcome.
expect() {
  local class=$1 name=$2 want=$3 pattern=$4
  shift 5
  timeout -k 5 "$TIMEOUT" "${WRAP[@]}" "$OCULAR" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
  local rc=$? why=""
  if [[ $rc == 124 || $rc == 137 ]]; then
    why="hang (no exit within ${TIMEOUT}s)"
  elif [[ $rc -gt 128 ]] || grep -qE "terminate called|Sanitizer|runtime error:|Aborted|what\(\):" "$TMP/err"; then
    why="abort (exit $rc)"
  elif [[ ! $rc =~ ^($want)$ ]]; then  # want: a code, or alternatives such as 1|2
    why="exit $rc, expected $want"
  elif [[ -n $pattern ]] && ! grep -qE -- "$pattern" "$TMP/err"; then
    why="stderr does not match '$pattern'"
  elif [[ $(wc -c <"$TMP/err") -gt 2000 ]]; then
    why="message longer than 2000 bytes"
  fi
  n_class[$class]=$(( ${n_class[$class]:-0} + 1 ))
  if [[ -z $why ]]; then
    ok_class[$class]=$(( ${ok_class[$class]:-0} + 1 ))
    echo "ok   [$class] $name (exit $rc)"
  else
    fails=$((fails + 1))
    echo "FAIL [$class] $name: $why"
    sed 's/^/       /' "$TMP/err" | head -5
  fi
}

# model NAME: a fresh model directory whose files link to the tiny checkpoint's; prints its path.
model() {
  local d=$TMP/models/$1
  mkdir -p "$d"
  for f in "$BASE"/*; do ln -s "$f" "$d/$(basename "$f")"; done
  echo "$d"
}

# config NAME SED_EXPR: a model whose config.json is the tiny one edited by sed; the edit must
# change the file (else the case would silently test nothing).
config() {
  local d
  d=$(model "$1")
  rm "$d/config.json"
  sed -E "$2" "$BASE/config.json" >"$d/config.json"
  if cmp -s "$BASE/config.json" "$d/config.json"; then
    echo "FAIL: case $1: the edit '$2' did not change config.json" >&2
    fails=$((fails + 1))
  fi
  echo "$d"
}

# expect_run CLASS NAME RC PATTERN DIR: expect on a normal run of the model in DIR.
expect_run() {
  expect "$1" "$2" "$3" "$4" -- run -m "$5" -i "$IMG" -p "caption en" --max-tokens 2
}

# ---------------------------------------------------------------------------------------------
# config.json: sizes, types, unsupported keys, consistency rules, malformed JSON.
T='/"text_config"/,/}/'   # sed range: the text_config section
V='/"vision_config"/,/}/'
c() {  # c NAME RC PATTERN SED_EXPR
  local d
  d=$(config "$1" "$4")
  expect_run config "$1" "$2" "$3" "$d"
}
c layers_negative 4 'text_config.num_hidden_layers = -1' "$T s/\"num_hidden_layers\": 3/\"num_hidden_layers\": -1/"
c layers_zero 4 'text_config.num_hidden_layers = 0' "$T s/\"num_hidden_layers\": 3/\"num_hidden_layers\": 0/"
c layers_huge 6 'num_hidden_layers.*limit of 1024' "$T s/\"num_hidden_layers\": 3/\"num_hidden_layers\": 2000000000/"
c layers_1e300 6 'num_hidden_layers = 1e\+300' "$T s/\"num_hidden_layers\": 3/\"num_hidden_layers\": 1e300/"
c layers_300_digits 6 'num_hidden_layers = .{1,40} is over' "$T s/\"num_hidden_layers\": 3/\"num_hidden_layers\": $(printf '9%.0s' {1..300})/"
c layers_string 4 'num_hidden_layers must be an integer' "$T s/\"num_hidden_layers\": 3/\"num_hidden_layers\": \"3\"/"
c layers_fraction 4 'num_hidden_layers must be an integer' "$T s/\"num_hidden_layers\": 3/\"num_hidden_layers\": 2.5/"
c vision_layers_negative 4 'vision_config.num_hidden_layers' "$V s/\"num_hidden_layers\": 2/\"num_hidden_layers\": -7/"
c hidden_zero 4 'text_config.hidden_size' "$T s/\"hidden_size\": 48/\"hidden_size\": 0/"
c hidden_4g 6 'text_config.hidden_size' "$T s/\"hidden_size\": 48/\"hidden_size\": 4294967296/"
c intermediate_negative 4 'text_config.intermediate_size' "$T s/\"intermediate_size\": 96/\"intermediate_size\": -96/"
c vocab_huge 6 'text_config.vocab_size' "$T s/\"vocab_size\": 2112/\"vocab_size\": 99999999999/"
c kv_heads_not_divisor 4 'multiple of num_key_value_heads' "$T s/\"num_key_value_heads\": 2/\"num_key_value_heads\": 3/"
c head_dim_odd 4 'head_dim \(23\) must be even' "$T s/\"head_dim\": 24/\"head_dim\": 23/"
c positions_huge 6 'max_position_embeddings' "$T s/\"max_position_embeddings\": 8192/\"max_position_embeddings\": 1e15/"
c rms_eps_zero 4 'rms_norm_eps' "$T s/\"rms_norm_eps\": 1e-06/\"rms_norm_eps\": 0/"
c rope_theta_negative 4 'rope_theta' "$T s/\"rope_theta\": 10000.0/\"rope_theta\": -1/"
c query_scalar_zero 4 'query_pre_attn_scalar' "$T s/\"query_pre_attn_scalar\": 20/\"query_pre_attn_scalar\": 0/"
c softcap_negative 4 'attn_logit_softcapping' "$T s/\"attn_logit_softcapping\": 50.0/\"attn_logit_softcapping\": -50/"
c sliding_window_negative 4 'sliding_window' "$T s/\"sliding_window\": 8/\"sliding_window\": -8/"
c layer_types_count 4 'layer_types has 2 entries' "/\"sliding_attention\",$/{N;s/\"sliding_attention\",\n *\"full_attention\",/\"full_attention\",/}"
c layer_types_unknown 5 'layer_types\[1\]' "s/\"full_attention\"/\"chunked_attention\"/"
c attention_bias 5 'text_config.attention_bias = true' "s/\"attention_bias\": false/\"attention_bias\": true/"
c quick_gelu_text 5 "text_config.hidden_activation = 'quick_gelu'" "$T s/\"hidden_activation\": \"gelu_pytorch_tanh\"/\"hidden_activation\": \"quick_gelu\"/"
c quick_gelu_vision 5 "vision_config.hidden_act = 'quick_gelu'" "$V s/\"hidden_act\": \"gelu_pytorch_tanh\"/\"hidden_act\": \"quick_gelu\"/"
c rope_scaling 5 'text_config.rope_scaling' "s/\"rope_theta\": 10000.0,/\"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0},/"
c bidirectional 5 'use_bidirectional_attention' "s/\"attention_bias\": false,/\"attention_bias\": false, \"use_bidirectional_attention\": true,/"
c vision_use_head 5 'vision_use_head' "s/\"vision_use_head\": false/\"vision_use_head\": true/"
c vision_model_type 5 "clip_vision_model" "s/\"siglip_vision_model\"/\"clip_vision_model\"/"
c text_model_type 5 "text_config.model_type = 'llama'" "s/\"model_type\": \"gemma2\"/\"model_type\": \"llama\"/"
c architecture 5 "model_type 'llava'" "s/\"model_type\": \"paligemma\"/\"model_type\": \"llava\"/"
c no_model_type 4 'no model_type' "/\"model_type\": \"paligemma\"/d"
c image_size_not_multiple 4 'multiple of patch_size' "$V s/\"image_size\": 56/\"image_size\": 50/"
c image_size_huge 6 'vision_config.image_size' "$V s/\"image_size\": 56/\"image_size\": 1000000/"
c channels 5 'num_channels' "$V s/\"num_channels\": 3/\"num_channels\": 4/"
c image_token_outside_vocab 4 'image_token_index \(999999\)' "s/\"image_token_index\": 2048/\"image_token_index\": 999999/"
c projection_dim 4 'projection_dim \(64\) must equal' "s/\"projection_dim\": 48,/\"projection_dim\": 64,/"
c eos_outside_vocab 4 'eos_token_id' "s/\"eos_token_id\": 1,/\"eos_token_id\": 70000,/"
c text_config_not_object 4 'text_config must be an object' "s/\"text_config\": \{/\"text_config\": 7, \"unused\": {/"
c truncated_json 4 'config.json: not a JSON object: invalid JSON at line' '30,$d'
c trailing_comma 4 'invalid JSON at line 9, column 29' '9s/,$/,,/'
c json_array 4 'config.json: not a JSON object' '1s/^\{/[{/; $s/\}$/}]/'
c nested_deep 4 'nested deeper than 64' "s/\"architectures\": \[/\"x\": $(printf '[%.0s' {1..100})$(printf ']%.0s' {1..100}), \"architectures\": [/"
# A few whole-file replacements.
d=$(model empty_config); rm "$d/config.json"; : >"$d/config.json"
expect_run config empty_file 4 'config.json.*invalid JSON at line 1, column 1' "$d"
d=$(model binary_config); rm "$d/config.json"; head -c 4096 "$BASE/model.safetensors" >"$d/config.json"
expect_run config binary_garbage 4 'config.json.*invalid JSON' "$d"
d=$(model utf16_config); rm "$d/config.json"; printf '\xff\xfe{\x00}\x00' >"$d/config.json"
expect_run config utf16 4 'config.json.*invalid JSON' "$d"

# ---------------------------------------------------------------------------------------------
# Model files that are not what they claim: FIFOs (must not block), links to /dev/zero (must
# not read forever), directories, oversized, missing, malformed.
special() {  # special NAME FILE KIND RC PATTERN: replace FILE in a model by KIND
  local d
  d=$(model "$1")
  rm -f "$d/$2"
  case $3 in
    fifo) mkfifo "$d/$2" ;;
    zero) ln -s /dev/zero "$d/$2" ;;
    dir) mkdir "$d/$2" ;;
    huge) truncate -s 300M "$d/$2" ;;
    missing) ;;
    garbage) printf '{"model": {"type": "BPE", "vocab": ' >"$d/$2" ;;
  esac
  expect_run files "$1" "$4" "$5" "$d"
}
special config_fifo config.json fifo 3 'config.json: is a FIFO'
special config_dev_zero config.json zero 3 'config.json: is a character device'
special config_dir config.json dir 3 'config.json: is a directory'
special config_huge config.json huge 6 'config.json: .*limit of 16777216 bytes'
special config_missing config.json missing 3 'config.json'
special tokenizer_fifo tokenizer.json fifo 3 'tokenizer.json: is a FIFO'
special tokenizer_dev_zero tokenizer.json zero 3 'tokenizer.json: is a character device'
special tokenizer_huge tokenizer.json huge 6 'tokenizer.json: .*limit of 268435456 bytes'
special tokenizer_malformed tokenizer.json garbage 4 'tokenizer.json.*invalid JSON at line 1'
special tokenizer_config_fifo tokenizer_config.json fifo 3 'tokenizer_config.json: is a FIFO'
special tokenizer_config_dev_zero tokenizer_config.json zero 3 'tokenizer_config.json: is a character'
special tokenizer_config_malformed tokenizer_config.json garbage 4 'tokenizer_config.json.*invalid JSON'
special preprocessor_fifo preprocessor_config.json fifo 3 'preprocessor_config.json: is a FIFO'
special preprocessor_dev_zero preprocessor_config.json zero 3 'preprocessor_config.json: is a character'
special preprocessor_dir preprocessor_config.json dir 3 'preprocessor_config.json: is a directory'
special preprocessor_malformed preprocessor_config.json garbage 4 'preprocessor_config.json: invalid JSON at line 1'
special preprocessor_missing preprocessor_config.json missing 3 'preprocessor_config.json'
special weights_fifo model.safetensors fifo 3 'model.safetensors: not a regular file'
special weights_dev_zero model.safetensors zero 3 'model.safetensors: not a regular file'
special weights_dir model.safetensors dir 3 'model.safetensors: not a regular file'
special weights_missing model.safetensors missing 3 'no model.safetensors'
special weights_garbage model.safetensors garbage 4 'model.safetensors'
d=$(model tokenizers_missing); rm "$d/tokenizer.json" "$d/tokenizer.model"
expect_run files tokenizers_missing 3 'neither tokenizer.json nor tokenizer.model' "$d"
d=$(model preprocessor_zero_std); rm "$d/preprocessor_config.json"
sed -E 's/"image_std": \[/"image_std": [0, /; s/(\[0, [^]]*),[^],]*\]/\1]/' "$BASE/preprocessor_config.json" >"$d/preprocessor_config.json"
expect_run files preprocessor_zero_std 4 'image_std' "$d"
# Sharded checkpoints: the index is read bounded too.
index() {  # index NAME KIND RC PATTERN
  local d
  d=$(model "$1")
  case $2 in
    fifo) mkfifo "$d/model.safetensors.index.json" ;;
    zero) ln -s /dev/zero "$d/model.safetensors.index.json" ;;
    malformed) echo '{"weight_map": {' >"$d/model.safetensors.index.json" ;;
    no_map) echo '{"metadata": {}}' >"$d/model.safetensors.index.json" ;;
    escape) echo '{"weight_map": {"x": "../../etc/passwd"}}' >"$d/model.safetensors.index.json" ;;
  esac
  expect_run files "$1" "$3" "$4" "$d"
}
index index_fifo fifo 3 'index.json: is a FIFO'
index index_dev_zero zero 3 'index.json: is a character device'
index index_malformed malformed 4 'index.json: invalid JSON at line 2, column 1'
index index_no_weight_map no_map 4 'index.json: no weight_map'
index index_path_escape escape 4 "bad shard for 'x'"
# Weights whose header parses but do not match the config.
d=$(model truncated_weights); rm "$d/model.safetensors"; head -c 500000 "$BASE/model.safetensors" >"$d/model.safetensors"
expect_run files truncated_weights 4 'model.safetensors' "$d"
d=$(model missing_tensor); rm "$d/model.safetensors"
LC_ALL=C sed 's/language_model.model.norm.weight/language_model.model.norm.wXXXXX/' "$BASE/model.safetensors" >"$d/model.safetensors"
expect_run files missing_tensor 4 "missing tensor 'language_model.model.norm.weight'" "$d"
expect_run files model_dir_missing 3 'nope' "$TMP/nope"
expect_run files model_dir_is_file 3 'config.json' "$IMG"

# ---------------------------------------------------------------------------------------------
# Images.
img() {  # img NAME RC PATTERN PATH [extra options]
  local name=$1 rc=$2 pattern=$3 path=$4
  shift 4
  expect images "$name" "$rc" "$pattern" -- run -m "$BASE" -i "$path" -p "caption en" --max-tokens 2 "$@"
}
mkfifo "$TMP/fifo.png"; ln -s /dev/zero "$TMP/zero.png"; mkdir "$TMP/dir.png"
img fifo 3 'fifo.png: not a regular file' "$TMP/fifo.png"
img dev_zero 3 'zero.png: not a regular file' "$TMP/zero.png"
img directory 3 'dir.png: not a regular file' "$TMP/dir.png"
img missing 3 'missing.png' "$TMP/missing.png"
: >"$TMP/empty.png"; img empty 2 'empty.png' "$TMP/empty.png"
echo "not an image" >"$TMP/text.png"; img text 2 'text.png: unrecognized image format' "$TMP/text.png"
head -c 300 "$IMG" >"$TMP/trunc.png"; img truncated_png 4 'trunc.png' "$TMP/trunc.png"
head -c 33 "$IMG" >"$TMP/header_only.png"; img header_only_png 4 'header_only.png' "$TMP/header_only.png"
# Committed PNGs with valid CRCs and absurd headers (tests/bad_inputs/make_files.py).
F=$ROOT/tests/bad_inputs/files
img huge_png_header 6 'huge_dims.png.*100000x100000.*--max-image-pixels' "$F/huge_dims.png"
img huge_png_header_raised_limit 6 'huge_dims.png.*--max-image-pixels' "$F/huge_dims.png" --max-image-pixels 268435456
img wide_png_header 4 'wide_dims.png: corrupt PNG' "$F/wide_dims.png"
img zero_width_png 4 'zero_width.png: corrupt PNG' "$F/zero_width.png"
img short_pixel_data_png 4 'short_idat.png' "$F/short_idat.png"
img over_max_pixels 6 'photo.png.*over the limit of 100 pixels \(--max-image-pixels\)' "$IMG" --max-image-pixels 100
{ printf 'BM'; printf '\x00\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00\x00\x00';
  printf '\xff\xff\xff\x7f\xff\xff\xff\x7f\x01\x00\x18\x00\x00\x00\x00\x00'; head -c 40 /dev/zero; } >"$TMP/huge.bmp"
img huge_bmp_header 6 'huge.bmp.*--max-image-pixels' "$TMP/huge.bmp"
{ printf 'BM'; printf '\x00\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00\x00\x00';
  printf '\x10\x00\x00\x00\x10\x00\x00\x00\x01\x00\x18\x00\x00\x00\x00\x00'; head -c 40 /dev/zero; } >"$TMP/trunc.bmp"
img truncated_bmp 4 'trunc.bmp.*truncated' "$TMP/trunc.bmp"
printf 'GIF89a\x10\x00\x10\x00\x00\x00\x00' >"$TMP/trunc.gif"; img truncated_gif 4 'trunc.gif' "$TMP/trunc.gif"
printf '\xff\xd8\xff\xe0\x00\x10JFIF\x00' >"$TMP/trunc.jpg"; img truncated_jpeg 4 'trunc.jpg' "$TMP/trunc.jpg"
printf 'RIFF\x10\x00\x00\x00WEBPVP8 ' >"$TMP/trunc.webp"; img truncated_webp 4 'trunc.webp' "$TMP/trunc.webp"
img second_image_missing 3 'missing2.png' "$IMG" -i "$TMP/missing2.png"
# Hand-made BMP headers: le32 N prints N as 4 little-endian bytes.
le32() { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)))"; }
bmp() {  # bmp WIDTH HEIGHT BITS COMPRESSION COLORS: file + 40-byte header, pixels follow
  printf 'BM'; le32 0; le32 0; le32 $((54 + 4 * $5)); le32 40; le32 "$1"; le32 "$2"
  printf '\x01\x00'; printf "$(printf '\\x%02x' "$3")\x00"; le32 "$4"; le32 0; le32 0; le32 0; le32 "$5"; le32 0
}
{ bmp 4 4 24 4 0; head -c 64 /dev/zero; } >"$TMP/jpeg_in.bmp"
img bmp_embedded_jpeg 5 'jpeg_in.bmp: BMP compression 4' "$TMP/jpeg_in.bmp"
{ bmp 4 4 16 3 0; le32 $((0xF00)); le32 $((0xF0)); le32 $((0xF)); head -c 64 /dev/zero; } >"$TMP/masks.bmp"
img bmp_unsupported_bitfields 5 'masks.bmp: BMP bitfields layout' "$TMP/masks.bmp"
{ bmp 8 8 8 1 2; le32 $((0xFF0000)); le32 $((0xFF)); printf '\x02\x01\x00\x00'; } >"$TMP/rle_short.bmp"
img bmp_rle_truncated 4 'rle_short.bmp: truncated BMP: the RLE data ends' "$TMP/rle_short.bmp"
{ bmp 4 4 7 0 0; head -c 64 /dev/zero; } >"$TMP/bits7.bmp"
img bmp_7_bits 4 'bits7.bmp: BMP with 7 bits per pixel' "$TMP/bits7.bmp"
{ bmp 4 4 8 0 70000; head -c 64 /dev/zero; } >"$TMP/palette_huge.bmp"
img bmp_palette_too_big 4 'palette_huge.bmp: BMP palette size 70000' "$TMP/palette_huge.bmp"
# Height -2147483647: negative (top-down) without the 0xFF top byte; named as written.
{ bmp 2 -2147483647 24 0 0; head -c 64 /dev/zero; } >"$TMP/neg_height.bmp"
img bmp_height_int_min 6 'neg_height.bmp: BMP header declares a height of -2147483647' "$TMP/neg_height.bmp"
printf 'GIF89a\xff\xff\xff\xff\x00\x00\x00' >"$TMP/huge.gif"
img huge_gif_screen 6 'huge.gif.*65535x65535.*--max-image-pixels' "$TMP/huge.gif"

# ---------------------------------------------------------------------------------------------
# Options: absurd values are refused by name before anything is loaded.
opt() {  # opt NAME RC PATTERN ARGS...
  local name=$1 rc=$2 pattern=$3
  shift 3
  expect options "$name" "$rc" "$pattern" -- "$@"
}
R=(run -m "$BASE" -i "$IMG" -p "caption en")
opt threads_huge 2 '--threads.*100000' "${R[@]}" --threads 100000
opt threads_negative 2 '--threads' "${R[@]}" --threads -1
opt threads_text 2 '--threads' "${R[@]}" --threads many
opt max_tokens_negative 2 '--max-tokens' "${R[@]}" --max-tokens -3
opt max_tokens_huge 2 '--max-tokens' "${R[@]}" --max-tokens 99999999999
opt temperature_nan 2 '--temperature' "${R[@]}" --temperature nan
opt temperature_inf 2 '--temperature' "${R[@]}" --temperature inf
opt temperature_negative 2 '--temperature' "${R[@]}" --temperature -1
opt top_p_nan 2 '--top-p' "${R[@]}" --top-p nan
opt top_p_over_one 2 '--top-p' "${R[@]}" --top-p 2
opt top_k_negative 2 '--top-k' "${R[@]}" --top-k -1
opt max_pixels_zero 2 '--max-image-pixels' "${R[@]}" --max-image-pixels 0
opt max_pixels_huge 2 '--max-image-pixels' "${R[@]}" --max-image-pixels 1000000000000
opt min_pixels_zero 2 '--min-pixels' "${R[@]}" --min-pixels 0
opt max_pixels_huge_processor 2 '--max-pixels' "${R[@]}" --max-pixels 1000000000000
# The processor's bounds are Qwen2VLImageProcessor's: another family refuses them at load.
opt max_pixels_paligemma 2 'Qwen2VLImageProcessor.*fixed size' "${R[@]}" --max-pixels 50176
Q=(run -m testdata/tiny/qwen25vl -i "$IMG" -p "hi" --max-tokens 1)
opt min_pixels_over_max_qwen 2 'min_pixels \(100352\) exceeds max_pixels \(50176\)' "${Q[@]}" --min-pixels 100352 --max-pixels 50176
opt max_pixels_under_window_qwen 2 'max_pixels = 700 must be in \[784, ' "${Q[@]}" --max-pixels 700
opt unknown_flag 2 '--frobnicate' "${R[@]}" --frobnicate
opt max_tokens_over_context 6 'exceed the context length 8192' "${R[@]}" --max-tokens 1000000
opt prompt_over_context 6 'exceed the context length' run -m "$BASE" -i "$IMG" -p "$(printf 'word %.0s' {1..20000})"
opt prompt_missing 2 '--prompt' run -m "$BASE" -i "$IMG"
opt bench_prompt_tokens_zero 2 '--prompt-tokens' bench -m "$BASE" --prompt-tokens 0
opt bench_roofline_nan 2 '--roofline-gbs' bench -m "$BASE" --roofline-gbs nan
opt eval_limit_negative 2 '--limit' eval -m "$BASE" --set x.jsonl --images . --limit -1
opt diff_tol_nan 2 '--tol' diff testdata/golden/pg1/photo_caption.safetensors testdata/golden/pg1/photo_caption.safetensors --tol nan
opt diff_no_common_taps 2 'no tap in common' diff testdata/images/expected.safetensors testdata/golden/pg1/photo_caption.safetensors
opt diff_over_tolerance 1 '' diff testdata/golden/pg1/photo_caption.safetensors testdata/golden/pg1/photo_detect.safetensors
opt diff_not_safetensors 4 'photo.png: not a safetensors file: it is a PNG image' diff "$IMG" testdata/golden/pg1/photo_caption.safetensors
# The audit's cases (issue 33): each ends with its documented code and says what is wrong.
opt unknown_command 2 "unknown command 'bogus'" bogus
opt threads_abc 2 '--threads: Value abc is not an integer' "${R[@]}" --threads abc
opt seed_negative 2 '--seed' "${R[@]}" --seed -1
opt seed_2e64 2 '--seed' "${R[@]}" --seed 2e64
opt seed_over_64_bits 2 '--seed' "${R[@]}" --seed 18446744073709551616
echo '{"id":0,"image":"a.png","width":5,"height":5,"kind":"ocr","prefix":"p","suffix":"s"}' >"$TMP/kind.jsonl"
opt eval_unknown_kind 4 "unknown kind 'ocr'" eval -m "$BASE" --set "$TMP/kind.jsonl" --images "$TMP"
# Threads the OS refuses (the address space capped, so thread stacks cannot be mapped; a
# resource limit that binds root too): the pool runs with the workers it got (a warning) or
# the engine names the refusal (6); never an abort.
# (Not under AddressSanitizer, whose shadow memory needs far more address space.)
if ! grep -qa __asan_init "$OCULAR"; then
  # shellcheck disable=SC2016
  WRAP=(bash -c 'ulimit -v 2000000 && exec "$0" "$@"')
  opt threads_refused_run "0|6" 'could only start .* of 1000 threads|cannot start a thread' "${R[@]}" --max-tokens 2 --threads 1000
  opt threads_refused_bench "0|6" 'could only start .* of 1000 threads|cannot start a thread' bench -m "$BASE" --threads 1000 --prompt-tokens 4 --decode-tokens 2
  WRAP=()
fi
# trace -o must never overwrite what it reads.
# A real copy (no links into testdata/): if a check failed, only the copy would be damaged.
d=$TMP/models/trace_target
cp -r "$BASE" "$d"
sum_before=$(cksum <"$d/model.safetensors")
opt trace_onto_checkpoint 2 'model.safetensors.*refusing to overwrite' trace -m "$d" -i "$IMG" -p "caption en" -o "$d/model.safetensors"
ln -s "$d/model.safetensors" "$TMP/alias.safetensors"
opt trace_onto_checkpoint_link 2 'refusing to overwrite' trace -m "$d" -i "$IMG" -p "caption en" -o "$TMP/alias.safetensors"
opt trace_onto_config 2 'config.json.*refusing to overwrite' trace -m "$d" -i "$IMG" -p "caption en" -o "$d/config.json"
cp "$IMG" "$TMP/input.png"
opt trace_onto_image 2 'input.png is the input .*refusing to overwrite' trace -m "$d" -i "$TMP/input.png" -p "caption en" -o "$TMP/input.png"
opt trace_onto_directory 2 'is a directory' trace -m "$d" -i "$IMG" -p "caption en" -o "$TMP"
opt draw_onto_input 2 '--draw .*input.png is the input' run -m "$d" -i "$TMP/input.png" -p "detect star" --draw "$TMP/input.png"
opt draw_onto_checkpoint 2 '--draw .*refusing to overwrite' run -m "$d" -i "$IMG" -p "detect star" --draw "$d/model.safetensors"
opt draw_missing_dir 3 '--draw .*does not exist' run -m "$d" -i "$IMG" -p "detect star" --draw "$TMP/nodir/out.png"
opt draw_without_image 2 '--draw needs an --image' run -m "$d" -p "detect star" --draw "$TMP/out.png"
cp "$ROOT/testdata/tasks/heldout_small.jsonl" "$TMP/set_copy.jsonl"
opt predictions_onto_set 2 '--predictions .*refusing to overwrite' eval -m "$d" --set "$TMP/set_copy.jsonl" --images "$ROOT/testdata/tasks" --predictions "$TMP/set_copy.jsonl"
if ! cmp -s "$ROOT/testdata/tasks/heldout_small.jsonl" "$TMP/set_copy.jsonl"; then
  echo "FAIL: eval overwrote its set"; fails=$((fails + 1))
fi
if [[ $(cksum <"$d/model.safetensors") != "$sum_before" ]]; then
  echo "FAIL: trace overwrote the checkpoint"; fails=$((fails + 1))
fi

# Other inputs a user passes: the eval set, the prompt, output paths.
mkfifo "$TMP/set.jsonl"
opt eval_set_fifo 3 'set.jsonl: is a FIFO' eval -m "$BASE" --set "$TMP/set.jsonl" --images "$TMP"
opt eval_set_dev_zero 3 'is a character device' eval -m "$BASE" --set /dev/zero --images "$TMP"
echo '{"image": "a.png", "kind": ' >"$TMP/bad_set.jsonl"
opt eval_set_malformed 4 'bad_set.jsonl:1: not valid JSON \(invalid JSON at line 1, column' eval -m "$BASE" --set "$TMP/bad_set.jsonl" --images "$TMP"
opt prompt_invalid_utf8 2 'not valid UTF-8' "${R[@]/caption en/$'caption \xff'}" --max-tokens 2
opt trace_out_missing_dir 3 '--out .*nodir/t.safetensors: directory .* does not exist' trace -m "$BASE" -i "$IMG" -p "caption en" --max-tokens 1 -o "$TMP/nodir/t.safetensors"
d=$(model tokenizer_model_fifo); rm "$d/tokenizer.json" "$d/tokenizer.model"; mkfifo "$d/tokenizer.model"
expect_run files tokenizer_model_fifo 3 'tokenizer.model: is a FIFO' "$d"

# ---------------------------------------------------------------------------------------------
# GGUF files: a valid one written by `ocular quantize` from the tiny checkpoint, then copies
# with one header field broken (le64/le32 write little-endian bytes at an offset).
GGUF=$TMP/tiny.gguf
"$OCULAR" quantize -m "$BASE" -o "$GGUF" --type q8_0 -q >/dev/null 2>&1 ||
  { echo "FAIL: cannot write $GGUF"; fails=$((fails + 1)); }
le64() { printf '\\x%02x' $(( $1 & 255 )) $(( ($1 >> 8) & 255 )) $(( ($1 >> 16) & 255 )) \
  $(( ($1 >> 24) & 255 )) $(( ($1 >> 32) & 255 )) $(( ($1 >> 40) & 255 )) $(( ($1 >> 48) & 255 )) \
  $(( ($1 >> 56) & 255 )); }
# patched NAME OFFSET BYTES...: a copy of the valid GGUF with BYTES written at OFFSET.
patched() {
  local f=$TMP/$1.gguf
  cp "$GGUF" "$f"
  printf "$3" | dd of="$f" bs=1 seek="$2" conv=notrunc status=none
  echo "$f"
}
gguf() {  # gguf NAME RC PATTERN FILE
  expect gguf "$1" "$2" "$3" -- run -m "$4" -i "$IMG" -p "caption en" --max-tokens 2
}
head -c 1000 "$GGUF" >"$TMP/truncated.gguf"
gguf truncated 4 '\[gguf\] .*truncated.gguf: ' "$TMP/truncated.gguf"
head -c "$(( $(stat -c %s "$GGUF") - 100 ))" "$GGUF" >"$TMP/short_data.gguf"
gguf data_past_end 4 "short_data.gguf: tensor '.*': data .* runs past the end" "$TMP/short_data.gguf"
gguf bad_magic 3 'neither a model directory' "$(patched bad_magic 0 'GGUX')"
gguf version_1 5 'version 1 is not supported' "$(patched version_1 4 '\x01\x00\x00\x00')"
gguf version_9 4 'unknown version 9' "$(patched version_9 4 '\x09\x00\x00\x00')"
gguf huge_tensor_count 4 'tensor_count .* exceeds' "$(patched huge_tensor_count 8 "$(le64 $((1 << 60)))")"
gguf huge_kv_count 4 'metadata_kv_count .* exceeds' "$(patched huge_kv_count 16 "$(le64 $((1 << 50)))")"
gguf huge_key_length 4 'metadata key 0: truncated' "$(patched huge_key_length 24 "$(le64 $((1 << 62)))")"
gguf llama_cpp_file 5 "without ocular's embedded configuration" "$ROOT/testdata/gguf/small.gguf"
mkfifo "$TMP/fifo.gguf"
gguf fifo 3 'fifo.gguf: neither a model directory' "$TMP/fifo.gguf"
expect gguf quantize_bad_type 2 'type' -- quantize -m "$BASE" -o "$TMP/x.gguf" --type q9_9
expect gguf quantize_from_gguf 2 'is a GGUF file' -- quantize -m "$GGUF" -o "$TMP/x.gguf"
expect gguf quantize_into_model 2 'refusing' -- quantize -m "$(model qdst)" -o "$TMP/models/qdst/model.safetensors"
expect gguf quantize_no_dir 3 'does not exist' -- quantize -m "$BASE" -o "$TMP/no/such/x.gguf"
expect gguf trace_onto_gguf 2 'refusing' -- trace -m "$GGUF" -i "$IMG" -p "caption en" -o "$GGUF"
[[ -f $TMP/no/such/x.gguf.partial || -f $TMP/x.gguf ]] && { echo "FAIL: a failed quantize left a file"; fails=$((fails + 1)); }

# ---------------------------------------------------------------------------------------------
# Controls: inputs that look unusual but are valid must still work (exit 0), so the checks
# above cannot pass by refusing everything.
E=$ROOT/testdata/images/edge
ok_run() {  # ok_run NAME PATTERN ARGS...: expects exit 0 and PATTERN on stdout+stderr
  local name=$1 pattern=$2
  shift 2
  expect accepted "$name" 0 '' -- "$@"
  if ! grep -qE -- "$pattern" "$TMP/out" "$TMP/err"; then
    echo "FAIL [accepted] $name: output does not match '$pattern'"; fails=$((fails + 1))
  fi
}
d=$(config ignored_keys "s/\"attention_dropout\": 0.0,/\"attention_dropout\": 0.1, \"attn_implementation\": \"sdpa\", \"use_cache\": false,/")
ok_run config_with_ignored_keys '"output_ids"' run -m "$d" -i "$IMG" -p "caption en" --max-tokens 2 --json
d=$(config softcap_null "s/\"attn_logit_softcapping\": 50.0/\"attn_logit_softcapping\": null/")
ok_run config_softcap_null '"output_ids"' run -m "$d" -i "$IMG" -p "caption en" --max-tokens 2 --json
for f in bmp16_565_v5.bmp bmp8_rle.bmp bmp4_rle.bmp bmp8_index_beyond_palette.bmp gif_index_beyond_table.gif; do
  ok_run "image_$f" '"output_ids"' run -m "$BASE" -i "$E/$f" -p "caption en" --max-tokens 2 --json
done
ok_run png_exif_rotate '"output_ids"' run -m "$BASE" -i "$E/exif6.png" -p "caption en" --max-tokens 2 --json --exif-rotate
ok_run webp_exif_rotate '"output_ids"' run -m "$BASE" -i "$E/exif8.webp" -p "caption en" --max-tokens 2 --json --exif-rotate
ok_run threads_max '"output_ids"' run -m "$BASE" -i "$IMG" -p "caption en" --max-tokens 2 --json --threads 1024
ok_run gguf_q8_0 '"output_ids"' run -m "$GGUF" -i "$IMG" -p "caption en" --max-tokens 2 --json
ok_run gguf_weight_dtype '"weight_dtype":"quantized"' run -m "$GGUF" -i "$IMG" -p "caption en" --max-tokens 2 --json
ok_run help_shows_defaults 'max-tokens INT:INT in \[0 - 1048576\]=64' run --help
ok_run help_lists_environment 'OCULAR_THREADS' --help
ok_run tokenize_has_no_image_options '^Options:' tokenize --help
for flag in --max-image-pixels --max-pixels --min-pixels; do
  if grep -q -- "$flag" "$TMP/out"; then
    echo "FAIL [accepted] tokenize --help lists $flag"; fails=$((fails + 1))
  fi
done

# ---------------------------------------------------------------------------------------------
echo
echo "bad-input corpus: by class (passed/total)"
total=0
for class in config files images options gguf accepted; do
  echo "  $class: ${ok_class[$class]:-0}/${n_class[$class]:-0}"
  total=$((total + ${n_class[$class]:-0}))
done
echo "  all: $((total - fails))/$total; $fails failure(s)"
[[ $fails == 0 ]]
