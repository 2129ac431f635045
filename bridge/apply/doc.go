// Package apply writes what the engine decided: each target table has a
// lane that applies its items in source order, as their calls finish, in
// target transactions of up to MaxOps items, each with the lane's
// checkpoint (package sink runs the transaction): the lane's loop is
// lane.go, its writes and how a refused write is told apart lanewrite.go,
// the registry of lanes lanes.go. Each lane runs on a goroutine of the
// leadership's supervisor (internal/supervise), which drains it at the
// soft stop and joins it before the next leadership. It turns items into sink
// ops (batch.go), counts the items waiting per row (rows.go, for the
// engine's never-pay-twice decisions), releases the byte budget once items
// are written, tells the tracker what is durable, and stores the slot's
// checkpoint (checkpoint.go). It knows the bridge's own write-back
// transactions (own.go), so that the engine skips them in the WAL.
//
// It sits below bridge/engine, which pushes items; of the bridge it imports
// bridge/cost (the budget), bridge/track, bridge/work, bridge/rules and
// bridge/leader (the lock its writes check), and below it sink, state,
// functions and provider (reason codes and error kinds), replication and
// metrics.
//
// Layer: parts.
package apply
