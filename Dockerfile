# syntax=docker/dockerfile:1
# pgimageai's container image for machines that reach a registry: a static binary built in
# the official Go image, copied into an image FROM scratch with the builder's CA bundle and a
# non-root user. scripts/build-image.sh builds the same image offline (docker import), which
# is what the tests use; this file adds the HEALTHCHECK that docker import cannot set.
#
#   docker build -t pgimageai .
#   docker run --rm -e PGIMAGEAI_DSN=postgres://... pgimageai          # run
#   docker run --rm -e PGIMAGEAI_DSN=postgres://... pgimageai migrate  # any other command

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# -tags nodynamic keeps the binary static (see scripts/build-image.sh).
RUN CGO_ENABLED=0 go build -tags nodynamic -trimpath -buildvcs=false -ldflags='-s -w' -o /out/pgimageai ./cmd/pgimageai
RUN mkdir -p /out/etc /out/tmp && chmod 1777 /out/tmp && \
	printf 'root:x:0:0:root:/root:/sbin/nologin\npgimageai:x:65532:65532:pgimageai:/nonexistent:/sbin/nologin\n' >/out/etc/passwd && \
	printf 'root:x:0:\npgimageai:x:65532:\n' >/out/etc/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/passwd /out/etc/group /etc/
COPY --from=build /out/tmp /tmp
COPY --from=build /out/pgimageai /usr/local/bin/pgimageai
USER 65532:65532
WORKDIR /tmp
ENV PGIMAGEAI_METRICS_ADDR=:9187
EXPOSE 9187
# /readyz: 200 while streaming or waiting as a healthy standby (pgimageai health --help).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/pgimageai", "health"]
ENTRYPOINT ["/usr/local/bin/pgimageai"]
CMD ["run"]
