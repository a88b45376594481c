"""Checks an input file passes *before* it is read: format, size, and nothing that runs code.

* ``.npy``: the header is read with :mod:`numpy.lib.format` first, so an
  object array (pickles) is refused without loading it, a header claiming more
  than the memory budget is refused before anything is allocated, and a file
  shorter than its header says is called truncated.
* ``.pt``: the archive's entry sizes are summed against the budget before
  ``torch.load(weights_only=True)`` reads the tensors.
* images: only PNG, JPEG, BMP, GIF, WebP and TIFF are opened (PIL would
  otherwise pick any decoder from the content, PostScript through Ghostscript
  included), the pixel count is checked against the budget from the header,
  and PIL's decompression-bomb guard becomes an :class:`InputError`.
"""

from __future__ import annotations

import contextlib
import os
import warnings
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator

import numpy as np
from numpy.lib import format as npformat

from .budget import check_input_size
from ..base.errors import InputError
from ..base.regular_file import open_regular

if TYPE_CHECKING:
    from PIL import Image

IMAGE_FORMATS = ("PNG", "JPEG", "BMP", "GIF", "WEBP", "TIFF")


def check_npy(path: Path, f: BinaryIO | None = None) -> None:
    """Raise :class:`InputError` unless ``path`` is a complete numeric ``.npy`` within budget.

    ``f``: the file already opened (by :func:`~.regular_file.open_regular`); it is
    read from its start and left where the header ends.
    """
    try:
        with contextlib.nullcontext(f) if f is not None else open_regular(path, "input file") as f:
            f.seek(0)
            size = os.fstat(f.fileno()).st_size
            version = npformat.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = npformat.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, _, dtype = npformat.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            offset = f.tell()
    except (ValueError, EOFError, SyntaxError) as exc:  # numpy reports a bad header as these
        raise InputError(f"{path.name} is not a valid .npy file ({str(exc).splitlines()[0][:120]}); "
                         "save the array with numpy.save") from exc
    except OSError as exc:
        raise InputError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    if dtype.hasobject:
        raise InputError(f"{path.name} holds Python objects, which are not loaded (pickles run "
                         "code); save a plain numeric array")
    if dtype.kind not in "biuf":
        raise InputError(f"{path.name} holds {dtype} values; save a numeric array")
    count = int(np.prod(shape, dtype=object)) if shape else 1
    nbytes = count * dtype.itemsize
    check_input_size(nbytes, f"{path.name} (shape {'x'.join(map(str, shape)) or 'scalar'}, {dtype})")
    have = size - offset
    if have < nbytes:
        raise InputError(f"{path.name} is truncated: its header promises {nbytes} bytes of data "
                         f"but the file holds {max(have, 0)}; save it again")


def check_torch_file(path: Path, f: BinaryIO | None = None) -> None:
    """Refuse a ``.pt`` archive whose tensors together exceed the budget (read from the zip index).

    ``f``: the file already opened; read from its start and left at its start.
    """
    source: Any = f if f is not None else path
    try:
        if f is not None:
            f.seek(0)
        if not zipfile.is_zipfile(source):
            return  # the legacy format has no index; weights_only loading still applies
        with zipfile.ZipFile(source) as zf:
            total = sum(i.file_size for i in zf.infolist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return  # torch.load reports a damaged file itself
    finally:
        if f is not None:
            f.seek(0)
    check_input_size(total, path.name)


@contextlib.contextmanager
def open_image(path: Path, channels: int) -> Iterator[Image.Image]:
    """The image at ``path``, opened as one of :data:`IMAGE_FORMATS` and checked against the
    pixel budget; every PIL failure is an :class:`InputError`."""
    from PIL import Image, UnidentifiedImageError  # lazy: Pillow takes ~20 ms to import

    with warnings.catch_warnings():
        # PIL warns above MAX_IMAGE_PIXELS and raises above twice that: both are refusals here.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        # never a FIFO or a device; PIL reads the opened file, closed with the image
        with open_regular(path, "image file") as fh:
            try:
                img = Image.open(fh, formats=list(IMAGE_FORMATS))
            except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
                raise InputError(f"{path.name} is too large an image for PIL's decompression-bomb "
                                 f"guard ({exc}); scale it down first") from exc
            except UnidentifiedImageError as exc:
                raise InputError(f"{path.name} is not a PNG, JPEG, BMP, GIF, WebP or TIFF image (or it is damaged); "
                                 "other formats are not opened (some run external programs): "
                                 "convert it to PNG") from exc
            except OSError as exc:
                raise InputError(f"cannot read {path.name} as an image: {exc}") from exc
            with img:
                w, h = img.size
                # the decoded image, then the float32 array handed to the model
                check_input_size(w * h * (max(len(img.getbands()), channels) + 4 * channels),
                                 f"image {path.name} ({w}x{h})")
                try:
                    yield img
                except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
                    raise InputError(f"{path.name} is too large an image for PIL's decompression-bomb "
                                     f"guard ({exc}); scale it down first") from exc
                except (OSError, ValueError, SyntaxError, EOFError) as exc:  # a damaged file
                    raise InputError(f"cannot decode {path.name}: {str(exc)[:200]}") from exc
