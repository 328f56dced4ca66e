"""Synthetic video for ``testsrc://`` URIs (tests, demos, benchmarks).

``testsrc://ticker`` shows lines of everyday English text (licence plates,
shop signs, street names, prices, numbers, dates) drawn with ``cv2.putText``
in several of OpenCV's faces, sizes and colours on coloured sign panels over a city-like backdrop.  The upper
part of the frame holds horizontal lanes whose signs scroll left or right;
the lower part is a departure-board style panel whose lines scroll upwards.
Every frame comes with its ground truth: the lines fully visible in it.

``testsrc://bars`` (moving colour bars over a gradient) and
``testsrc://noise`` (drifting smooth grey blobs) contain no text.

Options go in the query string, e.g.
``testsrc://ticker?width=640&height=480&fps=25&frames=200&seed=1``.
Everything is deterministic for a given seed, size and frame number.
Images are BGR uint8 (height, width, 3); coordinates are pixels.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from urllib.parse import parse_qsl, urlsplit

import cv2
import numpy as np

__all__ = ["PATTERNS", "TextLine", "TickerScene", "BarsScene", "NoiseScene", "parse_testsrc", "make_scene",
           "open_testsrc", "iter_frames", "random_text", "fair_to_read"]

PATTERNS = ("ticker", "bars", "noise")
SCHEME = "testsrc"

# Fonts a printed-text reader can fairly be asked to read (no script/cursive faces).
FONTS = (cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX, cv2.FONT_HERSHEY_COMPLEX,
         cv2.FONT_HERSHEY_TRIPLEX)
MIN_CAP_PX = 22   # smallest capital-letter height drawn, pixels
MAX_CAP_PX = 40   # largest, pixels


@dataclass(frozen=True)
class TextLine:
    """One visible line of text: its string and where its ink is.

    quad: (4, 2) float32 corners top-left, top-right, bottom-right, bottom-left.
    box:  (x1, y1, x2, y2) bounding box of the quad, pixels (x2, y2 exclusive).
    """

    text: str
    quad: np.ndarray
    box: tuple[float, float, float, float]


# ---------------------------------------------------------------------------- text
# Plates skip I, O, Q (read as 1, 0) and capitals shaped like their lower case (C, S, U, V, W, X, Z).
_PLATE_LETTERS = "ABDEFGHJKLMNPRTY"
_SIGNS = ("OPEN LATE", "24 Hour Service", "FRESH BREAD", "Pharmacy", "CITY BANK", "Hotel Central",
          "Coffee Shop", "NO PARKING", "Free WiFi", "BOOKS AND MUSIC", "Car Wash", "Pizza Express",
          "Flower Market", "Bus Stop", "Parcel Shop", "Hardware Store", "Fitness Club", "Bakery",
          "Dry Cleaning", "Opening Soon", "Grand Hotel", "Fish Market", "Taxi Rank", "Public Library")
_STREETS = ("Baker", "Elm", "Maple", "Church", "Station", "Market", "Queen", "King", "Park", "River",
            "Hill", "Oak", "Mill", "Bridge", "Victoria", "Harbour", "Lincoln", "Cedar", "Garden", "Castle")
_STREET_KINDS = ("Street", "Road", "Avenue", "Lane", "Way", "Drive", "Square")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_PLACES = ("Gate", "Platform", "Route", "Hall", "Exit", "Bus", "Track", "Bay")


def fair_to_read(text: str) -> bool:
    """False for lines a reader cannot be expected to get exactly right.

    In OpenCV's built-in faces a capital O and a zero have the same shape, so
    a line must not mix them with digits; and a line needs at least one
    letter, since digits and signs alone can make sense upside down
    ("$89.99" turned over reads "66'68$").
    """
    has_digit = any(c.isdigit() for c in text)
    return any(c.isalpha() for c in text) and not ("O" in text and has_digit)


def _candidate_text(rng: random.Random) -> str:
    kind = rng.randrange(6)
    letter = lambda: rng.choice(_PLATE_LETTERS)  # noqa: E731
    digits = lambda n: "".join(str(rng.randrange(10)) for _ in range(n))  # noqa: E731
    if kind == 0:
        if rng.random() < 0.5:
            return f"{letter()}{letter()} {digits(2)} {letter()}{letter()} {digits(4)}"
        return f"{letter()}{letter()}{letter()} {digits(4)}"
    if kind == 1:
        return rng.choice(_SIGNS)
    if kind == 2:
        street = f"{rng.choice(_STREETS)} {rng.choice(_STREET_KINDS)}"
        return f"{rng.randrange(1, 400)} {street}" if rng.random() < 0.4 else street
    if kind == 3:
        # No "Now": "Now $9.99" upside down reads "66.6$ MON", a fair 180-degree reading.
        price = f"${rng.randrange(1, 200)}.{rng.choice(('99', '49', '50', '95', '00', '25'))}"
        return rng.choice(("Sale {p}", "Just {p}", "Deal {p}", "Price {p}", "{p} each")).format(p=price)
    if kind == 4:
        return f"{rng.choice(_PLACES)} {rng.randrange(1, 100)}"
    day, month, year = rng.randrange(1, 29), rng.randrange(1, 13), rng.randrange(1990, 2031)
    return rng.choice((f"Date {day:02d}/{month:02d}/{year}", f"Valid {year}-{month:02d}-{day:02d}",
                       f"{_MONTHS[month - 1]} {day} {year}", f"Since {year}"))


def random_text(rng: random.Random) -> str:
    """A line of everyday text: licence plate, shop sign, street, price, number or date."""
    while True:
        text = _candidate_text(rng)
        if fair_to_read(text):
            return text


# ---------------------------------------------------------------------------- sprites
def _luma(bgr: tuple[int, int, int]) -> float:
    b, g, r = bgr
    return 0.114 * b + 0.587 * g + 0.299 * r


def _contrasting_pair(rng: random.Random) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(panel, ink) BGR colours at least 110 luma levels apart."""
    while True:
        panel = tuple(rng.randrange(256) for _ in range(3))
        ink = tuple(rng.randrange(256) for _ in range(3))
        if abs(_luma(panel) - _luma(ink)) >= 110:
            return panel, ink  # type: ignore[return-value]


@dataclass
class _Sprite:
    """A rendered sign: image (h, w, 3) BGR, ink box (x1, y1, x2, y2) inside it."""

    text: str
    image: np.ndarray
    ink: tuple[int, int, int, int]


@functools.lru_cache(maxsize=None)
def _cap_height(font: int, thickness: int) -> float:
    """Inked height of a capital H at font scale 1, pixels (measured, not the font's nominal size)."""
    mask = np.zeros((200, 200), np.uint8)
    cv2.putText(mask, "H", (20, 150), font, 3.0, 255, thickness, cv2.LINE_AA)
    rows = np.nonzero((mask > 64).any(axis=1))[0]
    return (rows[-1] - rows[0] + 1) / 3.0


def _render_sprite(text: str, rng: random.Random, panel: tuple[int, int, int] | None,
                   ink: tuple[int, int, int]) -> _Sprite:
    font = rng.choice(FONTS)
    cap_px = rng.randint(MIN_CAP_PX, MAX_CAP_PX)
    thickness = 2 if cap_px < 32 else 3
    scale = cap_px / _cap_height(font, thickness)
    (tw, th), base = cv2.getTextSize(text, font, scale, thickness)
    pad_x, pad_y = rng.randint(cap_px // 2, cap_px), rng.randint(cap_px // 3, cap_px // 2 + 4)
    h, w = th + base + 2 * pad_y + thickness, tw + 2 * pad_x + thickness
    img = np.zeros((h, w, 3), np.uint8)
    img[:] = panel if panel is not None else (0, 0, 0)
    cv2.putText(img, text, (pad_x, pad_y + th), font, scale, ink, thickness, cv2.LINE_AA)
    mask = np.zeros((h, w), np.uint8)
    cv2.putText(mask, text, (pad_x, pad_y + th), font, scale, 255, thickness, cv2.LINE_AA)
    ys, xs = np.nonzero(mask > 64)
    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    if panel is not None and rng.random() < 0.5:  # a border like a plate or a framed sign
        cv2.rectangle(img, (1, 1), (w - 2, h - 2), ink, 2)
    return _Sprite(text, img, box)


def _backdrop(width: int, height: int, rng: random.Random) -> np.ndarray:
    """A sky-to-street gradient with building-like blocks and mild grain; (H, W, 3) BGR."""
    top = np.array([rng.randrange(120, 230) for _ in range(3)], np.float32)
    bottom = np.array([rng.randrange(20, 110) for _ in range(3)], np.float32)
    t = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    img = np.broadcast_to(top * (1 - t) + bottom * t, (height, width, 3)).copy()
    for _ in range(rng.randint(4, 9)):
        bw, bh = rng.randint(width // 12, width // 4), rng.randint(height // 4, height)
        x = rng.randint(-bw // 2, width - bw // 2)
        img[height - bh:, max(0, x):x + bw] = [rng.randrange(40, 200) for _ in range(3)]
    grain = np.random.default_rng(rng.randrange(2**32)).normal(0.0, 4.0, (height, width, 1))
    return np.clip(img + grain, 0, 255).astype(np.uint8)


def _paste(dst: np.ndarray, src: np.ndarray, x: int, y: int,
           clip: tuple[int, int, int, int] | None = None) -> None:
    """Copy ``src`` into ``dst`` with its top-left at (x, y), clipped to ``clip`` (x1, y1, x2, y2)."""
    cx1, cy1, cx2, cy2 = clip or (0, 0, dst.shape[1], dst.shape[0])
    x1, y1 = max(x, cx1), max(y, cy1)
    x2, y2 = min(x + src.shape[1], cx2), min(y + src.shape[0], cy2)
    if x1 < x2 and y1 < y2:
        dst[y1:y2, x1:x2] = src[y1 - y:y2 - y, x1 - x:x2 - x]


# ---------------------------------------------------------------------------- scenes
@dataclass
class _Mover:
    sprite: _Sprite
    x0: float
    y0: float
    vx: float
    vy: float
    period: float     # the position wraps after travelling this far, pixels
    span: float       # start of the wrapped coordinate range, pixels


class TickerScene:
    """Scrolling text signs with per-frame ground truth.

    width, height: frame size in pixels (at least 320 x 240).
    fps: nominal frame rate; speeds are in pixels per frame.
    seed: everything (texts, fonts, colours, layout, speeds) follows from it.
    """

    def __init__(self, width: int = 1280, height: int = 720, fps: float = 25.0, seed: int = 0) -> None:
        if width < 320 or height < 240:
            raise ValueError(f"ticker needs at least 320x240 pixels, got {width}x{height}")
        self.width, self.height, self.fps, self.seed = width, height, fps, seed
        rng = random.Random(f"ticker:{seed}")
        self._background = _backdrop(width, height, rng)
        board_top = int(height * 0.62)
        self.board = (width // 16, board_top, width - width // 16, height - 8)   # x1, y1, x2, y2
        self._board_colour = (rng.randrange(10, 50), rng.randrange(10, 50), rng.randrange(10, 50))
        self._lanes = self._make_lanes(rng, 8, board_top - 10)
        self._board_lines = self._make_board(rng)

    def _make_lanes(self, rng: random.Random, top: int, bottom: int) -> list[_Mover]:
        """Horizontal lanes from y=top down to y=bottom, each with 1-4 signs on a loop."""
        movers: list[_Mover] = []
        y = top
        while True:
            sprites: list[_Sprite] = []
            gaps: list[int] = []
            for _ in range(40):
                panel, ink = _contrasting_pair(rng)
                sprite = _render_sprite(random_text(rng), rng, panel, ink)
                if sprite.image.shape[1] <= self.width - 8:
                    sprites.append(sprite)
                    gaps.append(rng.randint(60, max(61, self.width // 4)))
                if len(sprites) == 4 or sum(g + sp.image.shape[1] for g, sp in zip(gaps, sprites)) > self.width:
                    break
            lane_h = max((sp.image.shape[0] for sp in sprites), default=bottom)
            if not sprites or y + lane_h > bottom:
                return movers
            widest = max(sp.image.shape[1] for sp in sprites)
            # Loop length: a sign only jumps (wraps) while it is off screen on both sides.
            period = max(self.width + widest + 40, sum(g + sp.image.shape[1] for g, sp in zip(gaps, sprites)))
            speed = rng.choice((-1, 1)) * rng.uniform(2.0, 7.0)
            x0, offset = rng.uniform(0, period), 0
            for sp, gap in zip(sprites, gaps):
                dy = (lane_h - sp.image.shape[0]) // 2
                movers.append(_Mover(sp, x0 + offset, y + dy, speed, 0.0, period, -widest))
                offset += sp.image.shape[1] + gap
            y += lane_h + rng.randint(14, 36)

    def _make_board(self, rng: random.Random) -> list[_Mover]:
        """Two columns of lines scrolling upwards inside the board rectangle."""
        x1, y1, x2, y2 = self.board
        ink = (rng.randrange(0, 90), rng.randrange(170, 256), rng.randrange(200, 256))  # amber/yellow/white
        speed = rng.uniform(1.0, 3.0)
        mid, margin = (x1 + x2) // 2, 24
        movers: list[_Mover] = []
        for cx1, cx2 in ((x1 + margin // 2, mid - margin), (mid + margin, x2 - margin // 2)):
            sprites = []
            for _ in range(60):
                sp = _render_sprite(random_text(rng), rng, self._board_colour, ink)
                if sp.image.shape[1] <= cx2 - cx1:
                    sprites.append(sp)
                if len(sprites) == 12:
                    break
            if not sprites:
                continue
            pitch = max(sp.image.shape[0] for sp in sprites) + rng.randint(8, 20)
            count = min(len(sprites), -(-(y2 - y1) // pitch) + 2)  # one more than fits, plus one off board
            period = pitch * count
            for k, sp in enumerate(sprites[:count]):
                x = cx1 + rng.randint(0, cx2 - cx1 - sp.image.shape[1])
                movers.append(_Mover(sp, x, k * pitch, 0.0, -speed, period, y1 - pitch))
        return movers

    def _position(self, m: _Mover, seq: int) -> tuple[int, int]:
        if m.vx:
            x = m.span + (m.x0 + m.vx * seq) % m.period
            return int(round(x)), int(m.y0)
        y = m.span + (m.y0 + m.vy * seq) % m.period
        return int(m.x0), int(round(y))

    def render(self, seq: int) -> tuple[np.ndarray, list[TextLine]]:
        """Frame ``seq`` as BGR uint8 (height, width, 3) and its fully visible lines."""
        img = self._background.copy()
        lines: list[TextLine] = []
        full = (0, 0, self.width, self.height)
        bx1, by1, bx2, by2 = self.board
        cv2.rectangle(img, (bx1 - 4, by1 - 4), (bx2 + 3, by2 + 3), (90, 90, 90), -1)
        img[by1:by2, bx1:bx2] = self._board_colour
        for movers, clip in ((self._lanes, full), (self._board_lines, self.board)):
            for m in movers:
                x, y = self._position(m, seq)
                _paste(img, m.sprite.image, x, y, clip)
                ix1, iy1, ix2, iy2 = m.sprite.ink
                box = (x + ix1, y + iy1, x + ix2, y + iy2)
                if box[0] >= clip[0] and box[1] >= clip[1] and box[2] <= clip[2] and box[3] <= clip[3]:
                    quad = np.array([[box[0], box[1]], [box[2], box[1]], [box[2], box[3]], [box[0], box[3]]],
                                    np.float32)
                    lines.append(TextLine(m.sprite.text, quad, tuple(float(v) for v in box)))
        return img, lines


class BarsScene:
    """Eight colour bars drifting left (4 px a frame) over a vertical brightness ramp; no text."""

    _COLOURS = np.array([(255, 255, 255), (0, 255, 255), (255, 255, 0), (0, 255, 0),
                         (255, 0, 255), (0, 0, 255), (255, 0, 0), (0, 0, 0)], np.float32)

    def __init__(self, width: int = 1280, height: int = 720, fps: float = 25.0, seed: int = 0) -> None:
        self.width, self.height, self.fps, self.seed = width, height, fps, seed

    def render(self, seq: int) -> tuple[np.ndarray, list[TextLine]]:
        xs = (np.arange(self.width) + 4 * seq + self.seed) % self.width
        bars = self._COLOURS[(xs * 8 // self.width).astype(np.int64)]          # (W, 3)
        ramp = np.linspace(1.0, 0.35, self.height, dtype=np.float32)[:, None, None]
        return (bars[None] * ramp).astype(np.uint8), []


class NoiseScene:
    """Smooth grey blobs drifting diagonally (low-frequency noise); no text."""

    def __init__(self, width: int = 1280, height: int = 720, fps: float = 25.0, seed: int = 0) -> None:
        self.width, self.height, self.fps, self.seed = width, height, fps, seed
        field = np.random.default_rng(seed).random((height // 80 + 3, width // 80 + 3)).astype(np.float32)
        big = cv2.resize(field, (2 * width, 2 * height), interpolation=cv2.INTER_CUBIC)
        self._field = (np.clip(big, 0.0, 1.0) * 200 + 30).astype(np.uint8)

    def render(self, seq: int) -> tuple[np.ndarray, list[TextLine]]:
        dx, dy = (3 * seq) % self.width, (2 * seq) % self.height
        grey = self._field[dy:dy + self.height, dx:dx + self.width]
        return cv2.cvtColor(np.ascontiguousarray(grey), cv2.COLOR_GRAY2BGR), []


# ---------------------------------------------------------------------------- URIs
_OPTIONS: dict[str, Callable[[str], Any]] = {"width": int, "height": int, "fps": float, "frames": int, "seed": int}
_SCENES = {"ticker": TickerScene, "bars": BarsScene, "noise": NoiseScene}


def parse_testsrc(uri: str) -> tuple[str, dict[str, Any]]:
    """``testsrc://PATTERN?key=value&...`` -> (pattern, options).

    Options: width, height (pixels, default 1280x720), fps (default 25),
    frames (frame count; absent = endless), seed (default 0).  Only the
    options given appear in the dict.  Unknown patterns, options or bad
    values raise ValueError naming what is valid.
    """
    parts = urlsplit(uri)
    if parts.scheme != SCHEME:
        raise ValueError(f"not a {SCHEME}:// URI: {uri!r}")
    pattern = (parts.netloc or parts.path.strip("/")).lower()
    if pattern not in PATTERNS:
        raise ValueError(f"unknown test pattern {pattern!r} in {uri!r}; valid: {', '.join(PATTERNS)}")
    options: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        conv = _OPTIONS.get(key)
        if conv is None:
            raise ValueError(f"unknown option {key!r} in {uri!r}; valid: {', '.join(_OPTIONS)}")
        try:
            options[key] = conv(value)
        except ValueError:
            raise ValueError(f"option {key}={value!r} in {uri!r} is not a valid {conv.__name__}") from None
        least = 0 if key in ("frames", "seed") else 1
        if options[key] < least:
            raise ValueError(f"option {key}={value!r} in {uri!r} is out of range; valid: {least} or more")
    return pattern, options


Scene = TickerScene | BarsScene | NoiseScene


def make_scene(uri: str) -> tuple[Scene, dict[str, Any]]:
    """The scene for ``uri`` and the options given in it (see :func:`parse_testsrc`)."""
    pattern, options = parse_testsrc(uri)
    return _SCENES[pattern](**{k: v for k, v in options.items() if k != "frames"}), options


def open_testsrc(uri: str) -> tuple[Scene, int | None]:
    """The scene for ``uri`` and its frame count (None = endless)."""
    scene, options = make_scene(uri)
    return scene, options.get("frames")


def iter_frames(uri: str) -> Iterator[tuple[int, np.ndarray]]:
    """(seq, BGR uint8 image) for every frame of ``uri``; endless unless ``frames`` is given."""
    scene, frames = open_testsrc(uri)
    seq = 0
    while frames is None or seq < frames:
        yield seq, scene.render(seq)[0]
        seq += 1
