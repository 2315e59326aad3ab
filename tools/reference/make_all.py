"""Regenerates every fixture this package owns, in dependency order (`make fixtures`).

tokenizer -> tiny checkpoints (use the tokenizer) -> goldens (run the checkpoints).
Deterministic: running it twice gives byte-identical files (docs/testing.md).
"""

from tools.reference import common
from tools.reference.make_goldens import make_goldens
from tools.reference.make_tiny import make_tiny
from tools.reference.make_tokenizer import make_tokenizer


def main():
    common.set_determinism()
    make_tokenizer()
    make_tiny()
    make_goldens()


if __name__ == "__main__":
    main()
