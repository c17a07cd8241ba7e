package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spangledb/spangle"
)

// ready runs "spangle ready": GET <node>/readyz, nil when it answers 200.
// It is the probe of images without a shell or curl (the container
// image's HEALTHCHECK): the exit status is the answer.
func ready(args []string, stderr io.Writer) error {
	fs := newFlagSet("ready", "usage: spangle ready [--http URL] [--timeout D] [--cacert FILE | --insecure]", stderr)
	node := fs.String("http", spangle.LocalURL, "the node's HTTP address")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	tf := addTLSFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return badArgs(fs, "ready takes no arguments (got %q)", fs.Args())
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	u := strings.TrimSuffix(*node, "/") + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	client, err := tf.client()
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
