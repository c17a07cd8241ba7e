package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/blocks/seqfile"
	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/kvcluster"
)

// Over NATS, the client reads the cluster map and reaches the replicas of
// a key's partition in one hop.
func ExampleClient_Get() {
	natsURL, _, stop := startExampleNode()
	defer stop()

	nc, err := nats.Connect(natsURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	cfg := client.DefaultConfig()
	cfg.Conn = nc
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())

	ctx := context.Background()
	for _, key := range []string{"en", "fr", "xx"} {
		res, err := c.Get(ctx, "greetings", []byte(key))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: found=%v %q version=%s\n", key, res.Found, res.Value, res.Version)
	}
	_, err = c.Get(ctx, "nope", []byte("en"))
	fmt.Println(err)
	// Output:
	// en: found=true "Hello" version=20260301
	// fr: found=true "Bonjour" version=20260301
	// xx: found=false "" version=20260301
	// client: unknown db or no version: nope
}

// Over HTTP, a batch is one POST; every answer comes from one version.
func ExampleClient_GetMany() {
	_, httpURL, stop := startExampleNode()
	defer stop()

	cfg := client.DefaultConfig()
	cfg.URLs = []string{httpURL}
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())

	keys := [][]byte{[]byte("en"), []byte("xx"), []byte("de"), []byte("en")}
	results, err := c.GetMany(context.Background(), "greetings", keys)
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		fmt.Printf("%s: found=%v %q version=%s\n", keys[i], r.Found, r.Value, r.Version)
	}
	// Output:
	// en: found=true "Hello" version=20260301
	// xx: found=false "" version=20260301
	// de: found=true "Hallo" version=20260301
	// en: found=true "Hello" version=20260301
}

// startExampleNode runs what "spangle serve" runs, in process: a node
// serving db "greetings", an embedded NATS server on a random port, and
// both front doors. stop shuts everything down in serve's order.
func startExampleNode() (natsURL, httpURL string, stop func()) {
	dir, err := os.MkdirTemp("", "spangle-example")
	if err != nil {
		log.Fatal(err)
	}
	writeExampleVersion(filepath.Join(dir, "source", "greetings", "20260301"),
		[][2]string{{"en", "Hello"}, {"fr", "Bonjour"}, {"de", "Hallo"}})

	kcfg := kvwatch.DefaultConfig()
	kcfg.EmbeddedListen = "127.0.0.1:-1"
	kcfg.EmbeddedStoreDir = filepath.Join(dir, "data", "nats")
	kv, err := kvwatch.New(kcfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kv.Start(ctx); err != nil {
		log.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ncfg := node.DefaultConfig()
	ncfg.Source = filepath.Join(dir, "source")
	ncfg.DataDir = filepath.Join(dir, "data")
	ncfg.Advertiser = kvcluster.NewAdvertiser(kv)
	ncfg.AdvertiseAddress = ln.Addr().String()
	ncfg.AdvertiseSubjects = edge.SubjectPrefix(kcfg.ClusterName)
	n, err := node.New(ncfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := n.Start(); err != nil {
		log.Fatal(err)
	}
	<-n.Loaded()

	hcfg := edge.DefaultConfig()
	hcfg.Backend, hcfg.Batch, hcfg.List = n, n, n
	hs, err := edge.NewServer(hcfg)
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	scfg := edge.DefaultNATSConfig()
	scfg.Conn = kv.Conn()
	scfg.Backend, scfg.List = n, n
	ns, err := edge.NewNATSServer(scfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		log.Fatal(err)
	}

	return kv.ClientURL(), "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n.Drain(ctx)     //nolint:errcheck // example
		ns.Shutdown(ctx) //nolint:errcheck // example
		hs.Shutdown(ctx) //nolint:errcheck // example
		<-served
		n.Shutdown(ctx)  //nolint:errcheck // example
		kv.Shutdown(ctx) //nolint:errcheck // example
		os.RemoveAll(dir)
	}
}

// writeExampleVersion writes records as one SequenceFile, then _SUCCESS.
func writeExampleVersion(dir string, records [][2]string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "part-00000"))
	if err != nil {
		log.Fatal(err)
	}
	w, err := seqfile.NewWriter(f, seqfile.WriterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range records {
		if err := w.Append([]byte(r[0]), []byte(r[1])); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644); err != nil {
		log.Fatal(err)
	}
}
