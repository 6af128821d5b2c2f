#!/bin/bash
bash /tests/expect.sh hello
