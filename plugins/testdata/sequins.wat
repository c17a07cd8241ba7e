;; sequins.wat: sequins' partition, (h & 0x7fffffff) % n with h = 31*h + b
;; over the key bytes; no batch export (the host then calls it per key), no
;; alternate partition.
(module
  (memory (export "memory") 1)
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

  (func (export "spangle_partition") (param $p i32) (param $len i32) (param $n i32) (result i32)
    (local $h i32) (local $end i32)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return (i32.const -1))))
    (local.set $end (i32.add (local.get $p) (local.get $len)))
    (block $done
      (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
      (loop $next
        (local.set $h (i32.add (i32.mul (local.get $h) (i32.const 31)) (i32.load8_u (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br_if $next (i32.lt_u (local.get $p) (local.get $end)))))
    (i32.rem_u (i32.and (local.get $h) (i32.const 0x7fffffff)) (local.get $n))))
