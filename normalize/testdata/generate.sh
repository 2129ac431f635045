#!/bin/sh
# Regenerates the HEIF and AVIF fixtures of the normalize tests from
# gradient.png (a 64x48 gradient written by TestWriteGradient with
# PGIMAGEAI_WRITE_FIXTURES=1). Needs Debian's libheif-examples (heif-enc)
# and libavif-bin (avifenc).
set -eu
cd "$(dirname "$0")"
heif-enc -q 80 -o gradient.heic gradient.png
avifenc --min 10 --max 30 gradient.png gradient.avif

# generate.sh bench: the 12-megapixel HEIC and AVIF of BenchmarkNormalize12MP
# (large; not committed), from the benchmark's own JPEG.
if [ "${1:-}" = bench ]; then
	(cd .. && PGIMAGEAI_WRITE_FIXTURES=bench go test -run TestWriteGradient .)
	heif-enc -q 80 -o 12mp.heic 12mp.jpg
	avifenc -j all -s 8 --min 20 --max 40 12mp.jpg 12mp.avif
	rm -f 12mp.jpg
fi
