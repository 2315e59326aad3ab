"""Tests of the shapes world's segmentation data (shapes.py masks and tasks, vqvae.py).

  .venv/bin/python -m unittest tools.demo_model.segment_test

Each check has an independent oracle: the drawn mask against the box make_scene
reports, RLE against its own decoder and a hand-counted case, the VQ-VAE's encode ->
decode -> place-in-box round trip against the object's mask (with the trained demo VAE
when $SHAPES_VAE or testdata/seg/vae-shapes.npz exists; skipped
otherwise), the segment answer against the tokens it must contain.
"""

import os
import random
import re
import unittest

import numpy as np

from tools.demo_model import shapes

VAE = os.environ.get("SHAPES_VAE", os.path.join("testdata", "seg", "vae-shapes.npz"))


class MaskTest(unittest.TestCase):

  def test_mask_fills_its_box(self):
    for seed in range(40):
      _, scene = shapes.make_scene(seed)
      for o in scene.objects:
        m = shapes.object_mask(scene, o)
        ys, xs = np.nonzero(m)
        self.assertEqual((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1),
                         (o.x0, o.y0, o.x1, o.y1), (seed, o.shape))

  def test_masks_are_the_drawn_pixels(self):
    # Objects never overlap and the background is grey: where a mask is set, the image
    # has the object's colour exactly.
    for seed in range(10):
      img, scene = shapes.make_scene(seed)
      arr = np.asarray(img)
      for o in scene.objects:
        m = shapes.object_mask(scene, o)
        self.assertTrue((arr[m] == shapes.COLORS[o.color]).all())

  def test_rle_round_trip(self):
    rng = np.random.default_rng(0)
    for h, w in ((1, 1), (3, 5), (17, 9)):
      for _ in range(5):
        m = rng.random((h, w)) < 0.4
        counts = shapes.coco_rle(m)
        self.assertEqual(sum(counts), h * w)
        self.assertTrue((shapes.rle_decode(counts, h, w) == m).all())

  def test_rle_by_hand(self):
    m = np.array([[1, 0, 0], [1, 1, 0]], bool)  # column-major: 1 1 | 0 1 | 0 0
    self.assertEqual(shapes.coco_rle(m), [0, 2, 1, 1, 2])
    self.assertEqual(shapes.coco_rle(np.zeros((2, 2), bool)), [4])

  def test_segment_answer(self):
    codes = lambda scene, o: list(range(16))  # noqa: E731
    for seed in range(20):
      _, scene = shapes.make_scene(seed)
      task = shapes.make_task(scene, random.Random(seed), "segment", seg_codes=codes)
      self.assertTrue(task["prefix"].startswith("segment "))
      parts = task["suffix"].split(" ; ")
      self.assertEqual(len(parts), len(task["queries"]))
      for part, q in zip(parts, task["queries"]):
        self.assertRegex(part, r"^(<loc\d{4}>){4}" + "".join(f"<seg{c:03d}>" for c in
                                                                 range(16)) + " " + q + "$")

  def test_four_weights_draw_as_before(self):
    # v1's task stream must not change when the fifth kind exists.
    _, scene = shapes.make_scene(3)
    kinds = [shapes.make_task(scene, random.Random(s), weights=(0.25, 0.45, 0.1, 0.2))["kind"]
             for s in range(200)]
    self.assertNotIn("segment", kinds)
    self.assertEqual(len(set(kinds)), 4)

  def test_segment_needs_codes(self):
    _, scene = shapes.make_scene(1)
    with self.assertRaises(ValueError):
      shapes.make_task(scene, random.Random(0), "segment")


class MetricsTest(unittest.TestCase):

  def test_predicted_masks(self):
    from tools.demo_model import metrics
    seen = []

    def decode(loc, codes, w, h):
      seen.append((loc, codes))
      m = np.zeros((h, w), bool)
      m[loc[0]:loc[2], loc[1]:loc[3]] = True
      return m
    segs = "".join(f"<seg{c:03d}>" for c in range(100, 116))
    text = f"<loc0001><loc0002><loc0005><loc0006>{segs} star ; <loc0000><loc0000><loc0003><loc0003> circle"
    out = metrics.predicted_masks(text, 10, 10, decode)
    self.assertEqual([label for _, label in out], ["star", "circle"])
    self.assertIsNone(out[1][0])
    self.assertEqual(seen, [([1, 2, 5, 6], list(range(100, 116)))])
    self.assertEqual(int(out[0][0].sum()), 16)

  def test_segmentation_metrics_by_hand(self):
    from tools.demo_model import metrics
    a = np.zeros((4, 4), bool)
    a[:2, :2] = True  # 4 px
    b = np.zeros((4, 4), bool)
    b[:2, :] = True  # 8 px, contains a
    seg = metrics.SegmentationMetrics()
    # pred a vs gt b (IoU 0.5); a second prediction of the same label is unmatched; a
    # prediction without a mask matches nothing; a ground truth of another label is missed.
    seg.add([(a, "star"), (a, "star"), (None, "circle")], [(b, "star"), (b, "circle")])
    self.assertEqual(seg.ious, [0.5])
    self.assertAlmostEqual(seg.mean_iou(), 0.5)
    self.assertAlmostEqual(seg.miou(), 0.25)
    self.assertEqual((seg.num_pred, seg.num_gt), (3, 2))


@unittest.skipUnless(os.path.exists(VAE), f"no trained mask VAE at {VAE}")
class VaeTest(unittest.TestCase):

  def test_round_trip_iou(self):
    from tools.demo_model import vqvae
    vae = vqvae.load_npz(VAE)
    iou = vqvae.place_iou(vae, range(shapes.HELDOUT_SEED_BASE, shapes.HELDOUT_SEED_BASE + 40))
    self.assertGreater(iou, 0.9)

  def test_codes_in_range(self):
    from tools.demo_model import vqvae
    codec = vqvae.MaskCodec(VAE)
    _, scene = shapes.make_scene(7)
    for o in scene.objects:
      c = codec(scene, o)
      self.assertEqual(len(c), 16)
      self.assertTrue(all(0 <= v < vqvae.NUM_CODES for v in c))


if __name__ == "__main__":
  unittest.main()
