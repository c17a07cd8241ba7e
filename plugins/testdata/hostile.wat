;; hostile.wat: a partitioner and decoder that misbehave on demand. The first
;; byte of the key (or value) picks the behaviour:
;;   l  loop forever                  g  grow memory until it fails, then trap
;;   t  trap (unreachable)            x  proc_exit(3) after writing to stderr
;;   n  return a negative result      o  return n (out of range; decode: out of bounds)
;;   p  fd_prestat_get(3): the errno  f  path_open(3, "etc/passwd"): the errno
;;   e  environ_sizes_get: the count  a  args_sizes_get: the count
;;   c  clock_time_get(realtime): the low bits of the seconds
;; Anything else: partition 0; decode: the value unchanged.
;; The batch export looks at the first key only.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (memory (export "memory") 1)
  ;; 64: "etc/passwd"; 80: iovec {96, 25}; 96: the stderr message
  (data (i32.const 64) "etc/passwd")
  (data (i32.const 80) "\60\00\00\00\19\00\00\00")
  (data (i32.const 96) "hostile: exiting with 3\0a")
  (data (i32.const 128) "application/x-hostile")
  (global $heap (mut i32) (i32.const 1024))

  (func (export "spangle_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $need i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (local.get $end) (i32.const 0x7fff0000)) (then (return (i32.const 0))))
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16))
                              (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1))
        (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; $act runs the common behaviours of byte $b and returns a result for
  ;; the ones that return; -1000 means "none of them".
  (func $act (param $b i32) (param $n i32) (result i32)
    (if (i32.eq (local.get $b) (i32.const 0x6c)) ;; l
      (then (loop $forever (br $forever))))
    (if (i32.eq (local.get $b) (i32.const 0x67)) ;; g
      (then
        (loop $grow
          (br_if $grow (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
        (unreachable)))
    (if (i32.eq (local.get $b) (i32.const 0x74)) ;; t
      (then (unreachable)))
    (if (i32.eq (local.get $b) (i32.const 0x78)) ;; x
      (then
        (drop (call $fd_write (i32.const 2) (i32.const 80) (i32.const 1) (i32.const 8)))
        (call $proc_exit (i32.const 3))))
    (if (i32.eq (local.get $b) (i32.const 0x6e)) ;; n
      (then (return (i32.const -5))))
    (if (i32.eq (local.get $b) (i32.const 0x70)) ;; p
      (then (return (call $fd_prestat_get (i32.const 3) (i32.const 0)))))
    (if (i32.eq (local.get $b) (i32.const 0x66)) ;; f
      (then (return (call $path_open (i32.const 3) (i32.const 0) (i32.const 64) (i32.const 10)
                                     (i32.const 0) (i64.const -1) (i64.const -1) (i32.const 0)
                                     (i32.const 0)))))
    (if (i32.eq (local.get $b) (i32.const 0x65)) ;; e
      (then
        (drop (call $environ_sizes_get (i32.const 0) (i32.const 4)))
        (return (i32.load (i32.const 0)))))
    (if (i32.eq (local.get $b) (i32.const 0x61)) ;; a
      (then
        (drop (call $args_sizes_get (i32.const 0) (i32.const 4)))
        (return (i32.load (i32.const 0)))))
    (if (i32.eq (local.get $b) (i32.const 0x63)) ;; c
      (then
        (drop (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 0)))
        (return (i32.and
          (i32.wrap_i64 (i64.div_u (i64.load (i32.const 0)) (i64.const 1000000000)))
          (i32.const 0xffff)))))
    (i32.const -1000))

  (func $first (param $p i32) (param $len i32) (result i32)
    (if (result i32) (local.get $len)
      (then (i32.load8_u (local.get $p)))
      (else (i32.const 0))))

  (func (export "spangle_partition") (param $key i32) (param $len i32) (param $n i32) (result i32)
    (local $b i32) (local $r i32)
    (local.set $b (call $first (local.get $key) (local.get $len)))
    (if (i32.eq (local.get $b) (i32.const 0x6f)) ;; o
      (then (return (local.get $n))))
    (local.set $r (call $act (local.get $b) (local.get $n)))
    (if (result i32) (i32.eq (local.get $r) (i32.const -1000))
      (then (i32.const 0))
      (else (local.get $r))))

  (func (export "spangle_partition_batch")
        (param $keys i32) (param $lens i32) (param $count i32) (param $n i32) (param $out i32)
        (result i32)
    (local $b i32) (local $r i32) (local $i i32)
    (local.set $b (call $first (local.get $keys) (i32.load (local.get $lens))))
    (local.set $r (i32.const 0))
    (if (i32.eq (local.get $b) (i32.const 0x6f)) ;; o: an out-of-range result, status 0
      (then (local.set $r (local.get $n)))
      (else
        (local.set $r (call $act (local.get $b) (local.get $n)))
        (if (i32.lt_s (local.get $r) (i32.const 0))
          (then (if (i32.ne (local.get $r) (i32.const -1000))
            (then (return (local.get $r))))))
        (if (i32.eq (local.get $r) (i32.const -1000)) (then (local.set $r (i32.const 0))))))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (i32.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2))) (local.get $r))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (i32.const 0))

  (func (export "spangle_decode") (param $p i32) (param $len i32) (result i64)
    (local $b i32) (local $r i32)
    (local.set $b (call $first (local.get $p) (local.get $len)))
    (if (i32.eq (local.get $b) (i32.const 0x6f)) ;; o: a pointer beyond memory
      (then (return (i64.or (i64.shl (i64.const 0x7fff0000) (i64.const 32)) (i64.const 16)))))
    (local.set $r (call $act (local.get $b) (i32.const 0)))
    (if (i32.ne (local.get $r) (i32.const -1000))
      (then (return (i64.extend_i32_s (local.get $r)))))
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
            (i64.extend_i32_u (local.get $len))))

  (func (export "spangle_content_type") (result i64)
    (i64.or (i64.shl (i64.const 128) (i64.const 32)) (i64.const 21))))
