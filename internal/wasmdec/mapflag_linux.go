package wasmdec

import "syscall"

const mapNoReserve = syscall.MAP_NORESERVE
