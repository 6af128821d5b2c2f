#!/bin/bash
id -un > /app/who.txt
