"""Blur or box faces in a video with vapipe's stages in your own loop (no runner).

    python samples/face_video.py INPUT OUTPUT.mp4 [--blur]

Decode gives frames; the face detector adds ``face`` objects in source pixels;
the encoder writes an annotated, always-finalised H.264 MP4.
"""

from __future__ import annotations

import argparse
import sys

import cv2

from stages.decode import Decode
from stages.detect import Detect
from stages.encode import Encode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="video file, image folder or testsrc://PATTERN")
    ap.add_argument("output", help="MP4 to write")
    ap.add_argument("--blur", action="store_true", help="blur faces instead of drawing boxes")
    args = ap.parse_args(argv)

    try:
        frames, faces_seen = blur_or_box(args.input, args.output, args.blur)
    except (OSError, ValueError, RuntimeError) as exc:  # what stages raise for bad input: one line
        print(f"face_video: error: {exc}", file=sys.stderr)
        return 1
    print(f"{frames} frames, {faces_seen} faces -> {args.output}")
    return 0


def blur_or_box(uri: str, output: str, blur: bool) -> tuple[int, int]:
    """Write ``output`` with the faces of ``uri`` boxed or blurred; (frames, faces seen)."""
    faces_seen = frames = 0
    with Decode(uri=uri) as source, \
            Detect(model="mediapipe/face_detection_short_range", decoder="blazeface") as detector, \
            Encode(path=output, annotate=not blur) as encoder:
        for frame in source.frames():
            frame = detector(frame)
            if blur and len(frame.detections):
                image = frame.image().copy()  # frame.image() is shared: draw on a copy
                for x1, y1, x2, y2 in frame.detections.xyxy.astype(int):
                    roi = image[max(0, y1):y2, max(0, x1):x2]
                    if roi.size:
                        image[max(0, y1):y2, max(0, x1):x2] = cv2.GaussianBlur(roi, (31, 31), 0)
                frame.set_image(image)
            encoder(frame)
            frames += 1
            faces_seen += len(frame.detections)
    return frames, faces_seen


if __name__ == "__main__":
    sys.exit(main())
