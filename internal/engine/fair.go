package engine

import (
	"context"
	"sort"
	"time"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/fairshare"
	"github.com/agentbull/toolruntime/internal/telemetry"
)

// fairTop is how many keys of each work stream the stats and gauges name;
// the rest are summed under fairOther, so that label cardinality stays
// bounded whatever keys the gateways send.
const (
	fairTop   = 10
	fairOther = "_other"
)

// FairKeys are the busiest fairness keys of each work stream: their steps
// running on this worker and waiting in the fleet's backlog.
func (w *Worker) FairKeys(ctx context.Context) []telemetry.FairKey {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	backlog, err := w.js.Stream(ctx, bus.StreamBacklog)
	var out []telemetry.FairKey
	for _, f := range w.fair {
		keys := map[string]*telemetry.FairKey{}
		get := func(k string) *telemetry.FairKey {
			if keys[k] == nil {
				keys[k] = &telemetry.FairKey{Stream: f.Stream, Key: k}
			}
			return keys[k]
		}
		for _, s := range f.Stats(1 << 20) {
			get(s.Key).InFlight = int64(s.InFlight)
			get(s.Key).Held = int64(s.Queued)
		}
		if err == nil {
			if counts, err := fairshare.BacklogCounts(ctx, backlog, f.Kind); err == nil {
				for k, n := range counts {
					get(k).Backlog = int64(n)
				}
			}
		}
		list := make([]telemetry.FairKey, 0, len(keys))
		for _, k := range keys {
			list = append(list, *k)
		}
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i].InFlight+list[i].Held+list[i].Backlog, list[j].InFlight+list[j].Held+list[j].Backlog
			if a != b {
				return a > b
			}
			return list[i].Key < list[j].Key
		})
		if len(list) > fairTop {
			rest := telemetry.FairKey{Stream: f.Stream, Key: fairOther}
			for _, k := range list[fairTop:] {
				rest.InFlight += k.InFlight
				rest.Held += k.Held
				rest.Backlog += k.Backlog
			}
			list = append(list[:fairTop], rest)
		}
		out = append(out, list...)
	}
	return out
}

// fairStats is the data of the micro service's stats: the busiest keys.
func (w *Worker) fairStats() any {
	type key struct {
		Key      string `json:"key"`
		InFlight int64  `json:"in_flight"`
		Held     int64  `json:"held"`
		Backlog  int64  `json:"backlog"`
	}
	byStream := map[string][]key{}
	for _, k := range w.FairKeys(context.Background()) {
		byStream[k.Stream] = append(byStream[k.Stream], key{k.Key, k.InFlight, k.Held, k.Backlog})
	}
	return map[string]any{"fair_share": byStream}
}
