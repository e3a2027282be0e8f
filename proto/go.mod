module github.com/clawguard/clawguard/proto

go 1.26
