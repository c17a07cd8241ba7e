package kvwatch

import (
	"context"
	"fmt"
	"time"

	"github.com/spangledb/spangle/internal/diskspace"
)

// superviseEmbedded restarts the embedded server when its store failed a
// write (a full disk) or JetStream turned itself off, once the store's
// disk has EmbeddedMinFree bytes free again. A stream whose file store
// failed a write refuses every write after it, even when space is back,
// until the server restarts; the restart keeps the port and the store,
// so the node's in-process connection and outside clients reconnect on
// their own. It runs until ctx ends.
func (k *KV) superviseEmbedded(ctx context.Context) {
	t := time.NewTicker(k.cfg.EmbeddedRecoverCheck)
	defer t.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := k.emb.srv.Load()
		if s == nil || !s.Running() {
			continue // stopped on purpose (shutdown, tests): not ours to revive
		}
		why := ""
		switch {
		case k.emb.storeFailed.Load():
			why = "a store write failed"
		case !s.JetStreamEnabled():
			why = "JetStream turned itself off"
		default:
			waiting = false
			continue
		}
		free, err := diskspace.Free(k.cfg.EmbeddedStoreDir)
		if err == nil && free < k.cfg.EmbeddedMinFree {
			if !waiting {
				k.log.Error("embedded NATS store out of disk space; restarting it once space is free",
					"reason", why, "store_dir", k.cfg.EmbeddedStoreDir, "free_bytes", free, "min_free", k.cfg.EmbeddedMinFree)
				waiting = true
			}
			continue
		}
		waiting = false
		if err := k.restartEmbedded(ctx); err != nil {
			k.log.Error("restarting the embedded NATS server", "reason", why, "err", err)
			continue
		}
		k.met.embeddedRestarts.Inc()
		k.log.Warn("embedded NATS server restarted", "reason", why, "free_bytes", free)
	}
}

// restartEmbedded replaces the embedded server with a new one on the same
// options. Between the two, the connection's reconnects fail and retry.
func (k *KV) restartEmbedded(ctx context.Context) error {
	opts, err := serverOptions(k.cfg, k.self)
	if err != nil {
		return err
	}
	if old := k.emb.srv.Swap(nil); old != nil {
		sctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout*5)
		err := shutdownServer(sctx, old)
		cancel()
		if err != nil {
			k.emb.srv.CompareAndSwap(nil, old)
			return err
		}
	}
	k.emb.storeFailed.Store(false)
	s, err := k.emb.startServer(ctx, opts, k.cfg.Logger)
	if err != nil {
		return err
	}
	k.emb.srv.Store(s)
	return nil
}

// storeRoom returns an error when the embedded server's store has less
// than EmbeddedMinFree bytes free (or cannot be read), so that this KV
// does not ask it to create a stream then. A create on a full disk fails
// at best; at worst nats-server 2.15 panics and takes the process with it
// (seen in this suite: newFileStoreWithCreatedAndMode returns a nil store
// on some failed writes and its deferred unlock dereferences it). An
// external server's disk is its own.
func (k *KV) storeRoom() error {
	if !k.cfg.Embedded() {
		return nil
	}
	free, err := diskspace.Free(k.cfg.EmbeddedStoreDir)
	if err != nil {
		return fmt.Errorf("kvwatch: embedded store %s: %w", k.cfg.EmbeddedStoreDir, err)
	}
	if free < k.cfg.EmbeddedMinFree {
		return fmt.Errorf("kvwatch: embedded store %s has %d bytes free, under embedded min free %d: no bucket is created until space is back",
			k.cfg.EmbeddedStoreDir, free, k.cfg.EmbeddedMinFree)
	}
	return nil
}
