module github.com/clawguard/clawguard/bench

go 1.26
