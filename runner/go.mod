module github.com/clawguard/clawguard/runner

go 1.26
