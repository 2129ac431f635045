# syntax=docker/dockerfile:1
# pgimageai's container image for machines that reach a registry: the binary built with cgo
# (it opens libvips, the image backend of JPEG, HEIF and AVIF, at run time) in the official
# Go image, then copied into an image FROM scratch with exactly the shared libraries it
# loads (its ldd closure, libvips.so.42's and libvips's HEIF module's, laid out by
# scripts/image-root.sh), the builder's CA
# bundle and a non-root user. scripts/build-image.sh builds the same tree offline (docker
# import), which is what the tests use; this file adds the HEALTHCHECK that docker import
# cannot set. --build-arg BACKEND=go builds the static pure-Go binary instead (no libraries).
#
#   docker build -t pgimageai .
#   docker run --rm -e PGIMAGEAI_DSN=postgres://... pgimageai          # run
#   docker run --rm -e PGIMAGEAI_DSN=postgres://... pgimageai migrate  # any other command

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-trixie AS build
ARG BACKEND=vips
RUN if [ "$BACKEND" = vips ]; then apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libvips-dev && \
	rm -rf /var/lib/apt/lists/*; fi
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN if [ "$BACKEND" = vips ]; then \
		CGO_ENABLED=1 go build -trimpath -buildvcs=false -ldflags='-s -w' -o /out/pgimageai ./cmd/pgimageai; \
	else \
		CGO_ENABLED=0 go build -tags nodynamic -trimpath -buildvcs=false -ldflags='-s -w' -o /out/pgimageai ./cmd/pgimageai; \
	fi && \
	scripts/image-root.sh /out/root /out/pgimageai /etc/ssl/certs/ca-certificates.crt && \
	/out/root/usr/local/bin/pgimageai --version

FROM scratch
COPY --from=build /out/root/ /
USER 65532:65532
WORKDIR /tmp
ENV PGIMAGEAI_METRICS_ADDR=:9187
EXPOSE 9187
# /readyz: 200 while streaming or waiting as a healthy standby (pgimageai health --help).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/pgimageai", "health"]
ENTRYPOINT ["/usr/local/bin/pgimageai"]
CMD ["run"]
