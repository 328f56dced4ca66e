"""Peers: what users would run instead of vapipe, on the same frames and models.

* ``mediapipe`` — MediaPipe's own FaceMesh (``mediapipe==0.10.14``, ``solutions.face_mesh``)
  for pipelines of BlazeFace + face mesh (``faces``);
* ``rapidocr`` — RapidOCR (``rapidocr-onnxruntime==1.4.4``, ONNX Runtime) with the same three
  PP-OCR models for pipelines of text detection, direction and recognition (``ocr``).

MediaPipe 0.10.14 wants numpy 1.x and OpenCV's contrib build, which clash with vapipe's
environment, so peers live in their own virtual environment (``make peers`` makes
``.venv-peers``; ``VAPIPE_PEERS_PYTHON`` or ``vapipe bench --peer-python`` point at another)
and run in :mod:`bench.peers.worker`, which imports PyAV, numpy and the peer only — never
vapipe's core.  :mod:`bench.peers.registry` (vapipe's side) says which peers fit a pipeline
and whether their interpreter has them.  Nothing is imported here.
"""
