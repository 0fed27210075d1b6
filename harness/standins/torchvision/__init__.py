"""CPU stand-in for ``torchvision`` (harness only; never shipped).

The PyPI torchvision wheel needs a CUDA torch.  SGLang imports
``torchvision.io.decode_jpeg`` at module level, and transformers imports
``torchvision.io`` / ``torchvision.transforms`` names once it sees a
torchvision package.  Every ``torchvision.*`` import succeeds (see
``standin_toolkit``); nothing in it does any work.
"""

from standin_toolkit import make_package

__version__ = "0.28.0"
HARNESS_STAND_IN = True

make_package(__name__)
