package main

import (
	"fmt"
	"io"
	"os"

	"github.com/fabricsim/fabricsim/formats/stream"
)

func main() {
	r, err := stream.NewReader(os.Stdin, "stdin")
	if err != nil {
		panic(err)
	}
	for {
		k, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			panic(err)
		}
		switch k {
		case stream.KindGroup:
			g, _ := r.Group()
			fmt.Printf("group %+v\n", *g)
		case stream.KindCollective:
			c, _ := r.Collective()
			fmt.Printf("coll id=%d op=%s size=%d group=%d label=%q phase=%s mb=%d stage=%d layer=%d\n", c.ID, c.Op, c.Size, c.Group, c.Label, c.Phase, c.Microbatch, c.Stage, c.Layer)
		case stream.KindFlow:
			var f stream.Flow
			r.Flow(&f)
			fmt.Printf("flow %+v\n", f)
		}
	}
}
