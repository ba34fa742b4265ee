"""Small real-looking files in each language of infill.text.languages, with what the selectors pick.

SAMPLES[name] is (file name, source, {selector: the exact text it selects}); every source is
valid in its own language and has a function, a method and a type-like definition.
"""

from __future__ import annotations

TYPESCRIPT = """\
import { readFileSync } from "fs";

interface Shape {
  area(): number;
}

export class Circle implements Shape {
  constructor(private radius: number) {}

  area(): number {
    return Math.PI * this.radius ** 2;
  }
}

export function total(shapes: Shape[]): number {
  let sum = 0;
  for (const shape of shapes) {
    sum += shape.area();
  }
  return sum;
}
"""

JAVASCRIPT = """\
const fs = require("fs");

class Counter {
  constructor(start) {
    this.value = start;
  }

  increment(step = 1) {
    this.value += step;
    return this.value;
  }
}

function readLines(path) {
  const text = fs.readFileSync(path, "utf8");
  return text.split("\\n");
}

module.exports = { Counter, readLines };
"""

TSX = """\
import React from "react";

type Props = { name: string };

export function Greeting({ name }: Props) {
  const upper = name.toUpperCase();
  return <h1 className="greeting">Hello, {upper}</h1>;
}
"""

GO = """\
package geometry

import "math"

// Point is a place on the plane.
type Point struct {
\tX, Y float64
}

func (p *Point) Norm() float64 {
\treturn math.Sqrt(p.X*p.X + p.Y*p.Y)
}

func Distance(a, b Point) float64 {
\tdx := a.X - b.X
\tdy := a.Y - b.Y
\treturn math.Sqrt(dx*dx + dy*dy)
}
"""

RUST = """\
use std::collections::HashMap;

pub struct Inventory {
    items: HashMap<String, u32>,
}

impl Inventory {
    pub fn add(&mut self, name: &str, count: u32) {
        *self.items.entry(name.to_string()).or_insert(0) += count;
    }
}

fn total(inventory: &Inventory) -> u32 {
    inventory.items.values().sum()
}
"""

JAVA = """\
package shop;

import java.util.List;

public class Cart {
    private final List<Integer> prices;

    public Cart(List<Integer> prices) {
        this.prices = prices;
    }

    public int total() {
        int sum = 0;
        for (int price : prices) {
            sum += price;
        }
        return sum;
    }
}
"""

C = """\
#include <stdio.h>

struct point {
    int x;
    int y;
};

static int manhattan(const struct point *p) {
    int dx = p->x < 0 ? -p->x : p->x;
    return dx + (p->y < 0 ? -p->y : p->y);
}

int main(void) {
    struct point p = {3, -4};
    printf("%d\\n", manhattan(&p));
    return 0;
}
"""

CPP = """\
#include <vector>

namespace shapes {

class Box {
 public:
  Box(int w, int h) : w_(w), h_(h) {}
  int area() const;

 private:
  int w_, h_;
};

int Box::area() const {
  return w_ * h_;
}

}  // namespace shapes
"""

PYTHON = """\
import math


class Circle:
    def __init__(self, radius):
        self.radius = radius

    def area(self):
        return math.pi * self.radius ** 2


def total(shapes):
    return sum(shape.area() for shape in shapes)
"""

SAMPLES: dict[str, tuple[str, str, dict[str, str]]] = {
    "python": ("shapes.py", PYTHON, {
        "function:area": "    def area(self):\n        return math.pi * self.radius ** 2",
        "class:Circle": PYTHON[PYTHON.index("class Circle"): PYTHON.index("\n\n\ndef total")],
        "body:total": "    return sum(shape.area() for shape in shapes)",
        "statement:13": "    return sum(shape.area() for shape in shapes)",
    }),
    "typescript": ("shapes.ts", TYPESCRIPT, {
        "function:total": TYPESCRIPT[TYPESCRIPT.index("export function total"):].rstrip("\n"),
        "function:Circle.area": "  area(): number {\n    return Math.PI * this.radius ** 2;\n  }",
        "class:Shape": "interface Shape {\n  area(): number;\n}",
        "class:Circle": TYPESCRIPT[TYPESCRIPT.index("export class"): TYPESCRIPT.index("\n\nexport function")],
        "body:area@10": "    return Math.PI * this.radius ** 2;",
        "body:total": "  let sum = 0;\n  for (const shape of shapes) {\n    sum += shape.area();\n  }\n"
                      "  return sum;",
        "statement:17": "  for (const shape of shapes) {\n    sum += shape.area();\n  }",
    }),
    "javascript": ("counter.js", JAVASCRIPT, {
        "function:increment": "  increment(step = 1) {\n    this.value += step;\n    return this.value;\n  }",
        "class:Counter": JAVASCRIPT[JAVASCRIPT.index("class Counter"): JAVASCRIPT.index("\n\nfunction")],
        "body:readLines": '  const text = fs.readFileSync(path, "utf8");\n  return text.split("\\n");',
        "statement:19": "module.exports = { Counter, readLines };",
    }),
    "tsx": ("greeting.tsx", TSX, {
        "function:Greeting": TSX[TSX.index("export function"):].rstrip("\n"),
        "body:Greeting": TSX[TSX.index("  const upper"): TSX.index("\n}")],
    }),
    "go": ("geometry.go", GO, {
        "class:Point": "type Point struct {\n\tX, Y float64\n}",
        "function:Point.Norm": "func (p *Point) Norm() float64 {\n\treturn math.Sqrt(p.X*p.X + p.Y*p.Y)\n}",
        "body:Distance": "\tdx := a.X - b.X\n\tdy := a.Y - b.Y\n\treturn math.Sqrt(dx*dx + dy*dy)",
        "body:Point": "\tX, Y float64",
        "statement:16": "\tdy := a.Y - b.Y",
    }),
    "rust": ("inventory.rs", RUST, {
        "class:Inventory@3": "pub struct Inventory {\n    items: HashMap<String, u32>,\n}",
        "function:Inventory.add": RUST[RUST.index("    pub fn add"): RUST.index("\n}\n\nfn total")],
        "body:total": "    inventory.items.values().sum()",
        "statement:1": "use std::collections::HashMap;",
    }),
    "java": ("Cart.java", JAVA, {
        "class:Cart": JAVA[JAVA.index("public class"):].rstrip("\n"),
        "function:Cart.total": JAVA[JAVA.index("    public int total"): JAVA.index("\n}\n")],
        "function:Cart@8": "    public Cart(List<Integer> prices) {\n        this.prices = prices;\n    }",
        "body:total": JAVA[JAVA.index("        int sum"): JAVA.index("\n    }\n}")],
    }),
    "c": ("point.c", C, {
        "class:point": "struct point {\n    int x;\n    int y;\n}",
        "function:manhattan": C[C.index("static int"): C.index("\n\nint main")],
        "body:main": '    struct point p = {3, -4};\n    printf("%d\\n", manhattan(&p));\n    return 0;',
        "statement:10": "    return dx + (p->y < 0 ? -p->y : p->y);",
    }),
    "cpp": ("box.cpp", CPP, {
        "class:Box": CPP[CPP.index("class Box"): CPP.index(";\n\nint Box")],
        "function:Box.area": "int Box::area() const {\n  return w_ * h_;\n}",
        "body:Box.area": "  return w_ * h_;",
    }),
}  # fmt: skip
