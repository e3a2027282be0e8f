package main

import "fmt"

func main() { fmt.Println("not built yet") }
