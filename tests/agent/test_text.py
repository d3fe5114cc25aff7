"""Text cut for a person: at a word's end, with an ellipsis (agent/text.py)."""

from agent.text import clip


def test_a_cut_ends_at_a_whole_word_and_says_so():
    assert clip("run what users expect from a tool like this", 16) == "run what users…"
    assert clip("fits", 4) == "fits"
    assert clip("the rollback failed: see the transcript", 25) == "the rollback failed: see…"
    assert len(clip("a b c d e f g h i j k", 8)) <= 8


def test_one_long_word_is_cut_inside_with_the_mark():
    cut = clip("/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13", 24)
    assert cut.endswith("…") and len(cut) == 24 and cut.startswith("/usr/local/cuda-13.0/")
