package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestProblemFieldsEscapedForTheTerminal: a problem's fields (title,
// detail, an error's location, message and value) and a non-problem
// answer are printed with their control characters, ANSI escape
// sequences, bidi controls and other invisible format characters escaped
// (\x1b, \u202e…), so that an answer cannot rewrite the user's terminal;
// plain text, accented letters and other scripts stay readable.
func TestProblemFieldsEscapedForTheTerminal(t *testing.T) {
	const esc, rlo, csi1, del = "\x1b", "\u202e", "\u009b", "\x7f"
	problem := `{"title":"Bad\u001b[2J Request","status":422,"detail":"café\r\n200 OK \u202eevil",
		"errors":[
		  {"location":"body.url\u001b]8;;http://x\u0007","message":"rule\u009b31m: https\u007f only","value":"http://x/\u001b[31mred\u202e\u2066"},
		  {"location":"body.name","message":"naïve 日本語 text","value":{"k\u200b":"a\u0000b"}}]}`
	srv, _ := fakeAPI(t, 422, "application/problem+json", problem)
	_, errOut, err := execHerald(t, "", "endpoints", "create", "--server", srv.URL, "--api-key", "k", "--tenant", "t", "--url", "http://x")
	if err == nil {
		t.Fatal("no error for a 422 answer")
	}
	for _, bad := range []string{esc, rlo, csi1, del, "\r", "\u2066", "\u200b", "\x00", "\x07"} {
		if strings.Contains(errOut, bad) {
			t.Errorf("stderr holds %q raw:\n%q", bad, errOut)
		}
	}
	for _, want := range []string{
		`422 Bad\x1b[2J Request: café\r\n200 OK \u202eevil` + "\n",
		`  body.url\x1b]8;;http://x\a: rule\u009b31m: https\x7f only (value "http://x/\u001b[31mred\u202e\u2066")` + "\n",
		`  body.name: naïve 日本語 text (value {"k\u200b":"a\u0000b"})` + "\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if n := strings.Count(errOut, "\n"); n != 3 {
		t.Errorf("stderr has %d lines, want 3 (the problem and its two errors):\n%s", n, errOut)
	}

	// An answer that is no problem is printed as text: its lines kept, its
	// control and format characters escaped.
	srv, _ = fakeAPI(t, 502, "text/plain", "bad\x1b[31m gateway\r\nline two \u202eowt\u009b")
	_, errOut, err = execHerald(t, "", "events", "get", "evt_1", "--server", srv.URL, "--api-key", "k")
	if err == nil {
		t.Fatal("no error for a 502 answer")
	}
	if want := "502 Bad Gateway\nbad\\x1b[31m gateway\\r\nline two \\u202eowt\\u009b\n"; errOut != want {
		t.Errorf("stderr = %q, want %q", errOut, want)
	}
}

// TestStatusLineEscapedForTheTerminal: the reason phrase of an answer's
// status line, which the error repeats, is printed escaped too.
func TestStatusLineEscapedForTheTerminal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				http.ReadRequest(bufio.NewReader(c))
				io.WriteString(c, "HTTP/1.1 418 I\x1b[2Jm a \u202eteapot\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	_, errOut, err := execHerald(t, "", "events", "get", "evt_1", "--server", "http://"+ln.Addr().String(), "--api-key", "k")
	if err == nil {
		t.Fatal("no error for a 418 answer")
	}
	msg := err.Error() + "\n" + errOut
	if strings.Contains(msg, "\x1b") || strings.Contains(msg, "\u202e") {
		t.Errorf("the status line is printed raw: %q", msg)
	}
	if want := `418 I\x1b[2Jm a \u202eteapot`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
}
