module github.com/clawguard/clawguard/cli

go 1.26
