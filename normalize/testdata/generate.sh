#!/bin/sh
# Regenerates the HEIF and AVIF fixtures of the normalize tests from
# gradient.png (a 64x48 gradient written by TestWriteGradient with
# PGIMAGEAI_WRITE_FIXTURES=1). Needs Debian's libheif-examples (heif-enc)
# and libavif-bin (avifenc).
set -eu
cd "$(dirname "$0")"
heif-enc -q 80 -o gradient.heic gradient.png
avifenc --min 10 --max 30 gradient.png gradient.avif
