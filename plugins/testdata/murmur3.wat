;; murmur3.wat: a partitioner reproducing the built-in "murmur3" (32-bit
;; murmur3 of the key, seed 0, unsigned, modulo n), with the batch export.
;; With WithCloseOnContextDone, wazero checks for a deadline at every loop
;; iteration, at a cost of about 35 ns: keys under 32 bytes are hashed with
;; no loop, and the batch loop takes 4 keys per iteration.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))

  ;; spangle_alloc: a bump allocator that never frees (the host allocates
  ;; its buffer once per instance). Returns 0 when memory cannot grow.
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

  ;; $mix folds the 4-byte block $k into $h.
  (func $mix (param $h i32) (param $k i32) (result i32)
    (i32.add
      (i32.mul
        (i32.rotl
          (i32.xor (local.get $h)
            (i32.mul (i32.rotl (i32.mul (local.get $k) (i32.const 0xcc9e2d51)) (i32.const 15))
                     (i32.const 0x1b873593)))
          (i32.const 13))
        (i32.const 5))
      (i32.const 0xe6546b64)))

  (func $murmur3 (param $p i32) (param $len i32) (result i32)
    (local $h i32) (local $end i32) (local $k i32) (local $rem i32)
    (local.set $end (i32.add (local.get $p) (i32.and (local.get $len) (i32.const -4))))
    ;; 16-byte blocks while 32 bytes or more remain: keys under 32 bytes
    ;; run no loop at all.
    (block $short
      (br_if $short (i32.lt_u (i32.sub (local.get $end) (local.get $p)) (i32.const 32)))
      (loop $l16
        (local.set $h (call $mix (local.get $h) (i32.load (local.get $p))))
        (local.set $h (call $mix (local.get $h) (i32.load offset=4 (local.get $p))))
        (local.set $h (call $mix (local.get $h) (i32.load offset=8 (local.get $p))))
        (local.set $h (call $mix (local.get $h) (i32.load offset=12 (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))
        (br_if $l16 (i32.ge_u (i32.sub (local.get $end) (local.get $p)) (i32.const 32)))))
    ;; at most 28 bytes of whole blocks remain: straight-line code
    (if (i32.ge_u (i32.sub (local.get $end) (local.get $p)) (i32.const 16))
      (then
        (local.set $h (call $mix (local.get $h) (i32.load (local.get $p))))
        (local.set $h (call $mix (local.get $h) (i32.load offset=4 (local.get $p))))
        (local.set $h (call $mix (local.get $h) (i32.load offset=8 (local.get $p))))
        (local.set $h (call $mix (local.get $h) (i32.load offset=12 (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))))
    (if (i32.lt_u (local.get $p) (local.get $end))
      (then
        (local.set $h (call $mix (local.get $h) (i32.load (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 4)))))
    (if (i32.lt_u (local.get $p) (local.get $end))
      (then
        (local.set $h (call $mix (local.get $h) (i32.load (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 4)))))
    (if (i32.lt_u (local.get $p) (local.get $end))
      (then
        (local.set $h (call $mix (local.get $h) (i32.load (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 4)))))
    ;; tail
    (local.set $rem (i32.and (local.get $len) (i32.const 3)))
    (if (local.get $rem)
      (then
        (if (i32.eq (local.get $rem) (i32.const 3))
          (then (local.set $k (i32.shl (i32.load8_u offset=2 (local.get $p)) (i32.const 16)))))
        (if (i32.ge_u (local.get $rem) (i32.const 2))
          (then (local.set $k (i32.xor (local.get $k)
                  (i32.shl (i32.load8_u offset=1 (local.get $p)) (i32.const 8))))))
        (local.set $k (i32.xor (local.get $k) (i32.load8_u (local.get $p))))
        (local.set $h (i32.xor (local.get $h)
          (i32.mul (i32.rotl (i32.mul (local.get $k) (i32.const 0xcc9e2d51)) (i32.const 15))
                   (i32.const 0x1b873593))))))
    ;; finalization
    (local.set $h (i32.xor (local.get $h) (local.get $len)))
    (local.set $h (i32.xor (local.get $h) (i32.shr_u (local.get $h) (i32.const 16))))
    (local.set $h (i32.mul (local.get $h) (i32.const 0x85ebca6b)))
    (local.set $h (i32.xor (local.get $h) (i32.shr_u (local.get $h) (i32.const 13))))
    (local.set $h (i32.mul (local.get $h) (i32.const 0xc2b2ae35)))
    (i32.xor (local.get $h) (i32.shr_u (local.get $h) (i32.const 16))))

  ;; $one stores the partition of the key at $key, whose length is at $lens,
  ;; at $out, and returns the key's length.
  (func $one (param $key i32) (param $lens i32) (param $out i32) (param $n i32) (result i32)
    (local $len i32)
    (local.set $len (i32.load (local.get $lens)))
    (i32.store (local.get $out)
      (i32.rem_u (call $murmur3 (local.get $key) (local.get $len)) (local.get $n)))
    (local.get $len))

  (func (export "spangle_partition") (param $key i32) (param $len i32) (param $n i32) (result i32)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return (i32.const -1))))
    (i32.rem_u (call $murmur3 (local.get $key) (local.get $len)) (local.get $n)))

  ;; The batch loop takes 4 keys per iteration, for the same reason.
  (func (export "spangle_partition_batch")
        (param $keys i32) (param $lens i32) (param $count i32) (param $n i32) (param $out i32)
        (result i32)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return (i32.const -1))))
    (if (i32.lt_s (local.get $count) (i32.const 0)) (then (return (i32.const -1))))
    (block $done4
      (br_if $done4 (i32.lt_u (local.get $count) (i32.const 4)))
      (loop $next4
        (local.set $keys (i32.add (local.get $keys)
          (call $one (local.get $keys) (local.get $lens) (local.get $out) (local.get $n))))
        (local.set $keys (i32.add (local.get $keys)
          (call $one (local.get $keys) (i32.add (local.get $lens) (i32.const 4))
                     (i32.add (local.get $out) (i32.const 4)) (local.get $n))))
        (local.set $keys (i32.add (local.get $keys)
          (call $one (local.get $keys) (i32.add (local.get $lens) (i32.const 8))
                     (i32.add (local.get $out) (i32.const 8)) (local.get $n))))
        (local.set $keys (i32.add (local.get $keys)
          (call $one (local.get $keys) (i32.add (local.get $lens) (i32.const 12))
                     (i32.add (local.get $out) (i32.const 12)) (local.get $n))))
        (local.set $lens (i32.add (local.get $lens) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (local.set $count (i32.sub (local.get $count) (i32.const 4)))
        (br_if $next4 (i32.ge_u (local.get $count) (i32.const 4)))))
    ;; 0 to 3 keys left
    (block $done
      (br_if $done (i32.eqz (local.get $count)))
      (local.set $keys (i32.add (local.get $keys)
        (call $one (local.get $keys) (local.get $lens) (local.get $out) (local.get $n))))
      (br_if $done (i32.eq (local.get $count) (i32.const 1)))
      (local.set $keys (i32.add (local.get $keys)
        (call $one (local.get $keys) (i32.add (local.get $lens) (i32.const 4))
                   (i32.add (local.get $out) (i32.const 4)) (local.get $n))))
      (br_if $done (i32.eq (local.get $count) (i32.const 2)))
      (drop (call $one (local.get $keys) (i32.add (local.get $lens) (i32.const 8))
                       (i32.add (local.get $out) (i32.const 8)) (local.get $n))))
    (i32.const 0)))
