package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsCluster is a three-server NATS JetStream cluster run in this
// process for the scale scenario, each server with its monitoring
// endpoint (/varz, /jsz, /connz), so that the harness reads the traffic
// as an operator would. It can be shut down and started again on the same
// ports and store dirs (a full NATS-cluster restart).
type natsCluster struct {
	dir  string
	opts []*server.Options
	mu   sync.Mutex // guards srvs
	srvs []*server.Server
}

const natsClusterSize = 3

// natsReadyTimeout bounds each server's start.
const natsReadyTimeout = 30 * time.Second

func startNATSCluster(dir string) (*natsCluster, error) {
	c := &natsCluster{dir: dir}
	type ports struct{ client, cluster, http int }
	var ps []ports
	for range natsClusterSize {
		var p ports
		for _, dst := range []*int{&p.client, &p.cluster, &p.http} {
			addr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			_, port, _ := strings.Cut(addr, ":")
			*dst, _ = strconv.Atoi(port)
		}
		ps = append(ps, p)
	}
	var routes []string
	for _, p := range ps {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p.cluster))
	}
	for i, p := range ps {
		store := filepath.Join(dir, "s"+strconv.Itoa(i+1))
		if err := os.MkdirAll(store, 0o755); err != nil {
			return nil, err
		}
		o := &server.Options{
			ServerName: "s" + strconv.Itoa(i+1),
			Host:       "127.0.0.1",
			Port:       p.client,
			HTTPHost:   "127.0.0.1",
			HTTPPort:   p.http,
			JetStream:  true,
			StoreDir:   store,
			NoSigs:     true,
			NoLog:      true,
			MaxConn:    10_000,
			Cluster:    server.ClusterOpts{Name: "scale-nats", Host: "127.0.0.1", Port: p.cluster},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}
		c.opts = append(c.opts, o)
	}
	if err := c.restart(); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

// restart starts every server from its options (after shutdown, on the
// same ports and store dirs) and waits until each accepts connections.
func (c *natsCluster) restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.srvs = nil
	for _, o := range c.opts {
		oc := o.Clone()
		s, err := server.NewServer(oc)
		if err != nil {
			return err
		}
		s.Start()
		c.srvs = append(c.srvs, s)
	}
	for _, s := range c.srvs {
		if !s.ReadyForConnections(natsReadyTimeout) {
			return fmt.Errorf("NATS server %s not ready within %v", s.Name(), natsReadyTimeout)
		}
	}
	return nil
}

// shutdown stops every server; it is idempotent.
func (c *natsCluster) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.srvs {
		s.Shutdown()
		s.WaitForShutdown()
	}
	c.srvs = nil
}

func (c *natsCluster) clientURLs() []string {
	var urls []string
	for _, o := range c.opts {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return urls
}

// natsSample is the cluster's cumulative traffic at one moment.
type natsSample struct {
	// kvSeq sums the last sequence of the spangle cluster's KV streams
	// (each stream counted once, at its most advanced replica): every
	// write, delete and expiry marker adds one.
	kvSeq uint64
	// clientOut sums the messages sent to client connections (not routes)
	// over every server, from /connz.
	clientOut int64
	// inMsgs sums /varz in_msgs over every server (routes included).
	inMsgs int64
}

// sample reads the monitoring endpoints of every server.
func (c *natsCluster) sample(cluster string) (natsSample, error) {
	var s natsSample
	client := &http.Client{Timeout: 10 * time.Second}
	seqs := map[string]uint64{}
	prefix := "KV_spangle_" + cluster + "_"
	for _, o := range c.opts {
		base := fmt.Sprintf("http://127.0.0.1:%d", o.HTTPPort)
		var varz struct {
			InMsgs int64 `json:"in_msgs"`
		}
		if err := getJSON(client, base+"/varz", &varz); err != nil {
			return s, err
		}
		s.inMsgs += varz.InMsgs
		var connz struct {
			Conns []struct {
				OutMsgs int64 `json:"out_msgs"`
			} `json:"connections"`
		}
		if err := getJSON(client, base+"/connz?limit=100000", &connz); err != nil {
			return s, err
		}
		for _, cn := range connz.Conns {
			s.clientOut += cn.OutMsgs
		}
		var jsz struct {
			Accounts []struct {
				Streams []struct {
					Name  string `json:"name"`
					State struct {
						LastSeq uint64 `json:"last_seq"`
					} `json:"state"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		if err := getJSON(client, base+"/jsz?streams=true", &jsz); err != nil {
			return s, err
		}
		for _, a := range jsz.Accounts {
			for _, st := range a.Streams {
				if strings.HasPrefix(st.Name, prefix) {
					seqs[st.Name] = max(seqs[st.Name], st.State.LastSeq)
				}
			}
		}
	}
	for _, v := range seqs {
		s.kvSeq += v
	}
	return s, nil
}

func getJSON(client *http.Client, url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
